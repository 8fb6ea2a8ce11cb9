"""The contract through the real command: enqueue here, ``manage.py runworker --burst``
in a subprocess, read the results here."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from echomq_django.compat import TaskResultStatus
from project.demo import tasks as demo_tasks
from tests.django import tasks

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def runworker(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.django.settings", "ECHOMQ_TEST_URL": url}
    return subprocess.run(
        [sys.executable, "manage.py", "runworker", "default", "emails", "slow", "--burst", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_runworker_burst_runs_the_framework_contract(jobs, url):
    ok = tasks.add.enqueue(20, 22)
    failing = tasks.fail.enqueue("kaput")
    in_context = tasks.flaky.enqueue(2)
    coroutine = tasks.async_add.enqueue(1, 2)
    deferred = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(0, 0)
    low, high = (tasks.echo.using(priority=p).enqueue(p) for p in (-5, 5))
    discovered = demo_tasks.add.enqueue(3, 4)  # an installed app's tasks.py: autodiscovered

    proc = runworker(url, "--name", "sub-worker")
    assert proc.returncode == 0, proc.stderr

    ok.refresh()
    assert (ok.status, ok.return_value, ok.worker_ids) == (
        TaskResultStatus.SUCCESSFUL, 42, ["sub-worker"]
    )  # fmt: skip
    failed = tasks.fail.get_result(failing.id)
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 2
    assert {e.exception_class_path for e in failed.errors} == {"builtins.ValueError"}
    assert "ValueError: kaput" in failed.errors[-1].traceback
    assert tasks.flaky.get_result(in_context.id).return_value == {"attempt": 2, "id": in_context.id}
    assert tasks.async_add.get_result(coroutine.id).return_value == 3
    assert tasks.add.get_result(deferred.id).status == TaskResultStatus.READY
    assert demo_tasks.add.get_result(discovered.id).return_value == 7
    high_done, low_done = (tasks.echo.get_result(r.id).finished_at for r in (high, low))
    assert high_done < low_done
