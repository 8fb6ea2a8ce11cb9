"""One log line per job event, read from a real ``runworker`` process's stderr."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.django import tasks

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d ")
FIELDS = {"job_id", "task", "queue", "attempt", "max_attempts", "duration_ms", "outcome", "worker"}


def runworker(url: str, settings: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings, "ECHOMQ_TEST_URL": url}
    return subprocess.run(
        [sys.executable, "manage.py", "runworker", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_json_lines_one_per_job_event_with_stable_fields(jobs, url):
    ok = tasks.add.enqueue(1, 2)
    failing = tasks.fail.enqueue("kaput")  # max_attempts=2, no backoff: retried once, then dead
    proc = runworker(
        url, "tests.logs.settings_json", "default", "emails", "--burst", "--name", "w1"
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stderr.splitlines() if line.strip()]
    assert all({"time", "level", "logger", "process", "message"} <= set(e) for e in lines)
    events = [e for e in lines if e["logger"] == "echomq.job"]
    assert sorted((e["job_id"], e["outcome"]) for e in events) == sorted(
        [(ok.id, "completed"), (failing.id, "retried"), (failing.id, "dead")]
    )
    by_outcome = {e["outcome"]: e for e in events}
    assert all(set(e) >= FIELDS for e in events)
    done, retried, dead = by_outcome["completed"], by_outcome["retried"], by_outcome["dead"]
    assert (done["task"], done["queue"], done["attempt"], done["worker"]) == (
        "tests.django.tasks.add", "default", 1, "w1"
    )  # fmt: skip
    assert (retried["attempt"], retried["max_attempts"], retried["retry_in_ms"]) == (1, 2, 0)
    assert retried["error"] == "ValueError: kaput"
    assert (dead["attempt"], dead["level"], dead["error"]) == (2, "ERROR", "ValueError: kaput")
    # Each attempt's traceback once: the retried one on its event, the last on Django's line.
    tracebacks = [e for e in lines if "ValueError: kaput" in e.get("exc_info", "")]
    framework = "django.tasks" if sys.modules.get("django.tasks") else "django_tasks"
    assert [(e["logger"], e.get("outcome")) for e in tracebacks] == [
        ("echomq.job", "retried"),
        (framework, None),
    ]
    assert "will be retried" not in proc.stderr
    # Django's per-task INFO lines (started, finished) would repeat the event: off.
    assert not [e for e in lines if e["logger"].startswith("django") and e["level"] == "INFO"]


def test_text_lines_share_one_timestamp_format(jobs, url):
    tasks.fail.enqueue("kaput")
    proc = runworker(url, "tests.django.settings", "emails", "--burst")
    assert proc.returncode == 0, proc.stderr
    heads = [line for line in proc.stderr.splitlines() if re.match(r"^\d{4}-", line)]
    assert heads and all(ISO.match(line) for line in heads), heads
    retried = [line for line in heads if " echomq.job[" in line and " retried (" in line]
    assert len(retried) == 1
    assert "queue=emails attempt=1/2 retry_in=0s error='ValueError: kaput'" in retried[0]
    assert proc.stderr.count("ValueError: kaput\n") == 2  # one traceback per attempt


def test_runworker_warns_about_a_queue_no_backend_feeds(jobs, url):
    proc = runworker(url, "tests.django.settings", "defualt", "--burst")
    assert proc.returncode == 0, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if "'defualt'" in line]
    assert " WARNING echomq.runworker" in line
    assert "is not configured" in line and "configured: default, emails, slow" in line
    assert "not configured" not in runworker(url, "tests.django.settings", "slow", "--burst").stderr


def test_a_bad_log_format_stops_the_command(url, tmp_path):
    (tmp_path / "bad_log_settings.py").write_text(
        "from tests.django.settings import *\nECHOMQ = {**ECHOMQ, 'LOG_FORMAT': 'xml'}\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bad_log_settings",
        "ECHOMQ_TEST_URL": url,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
    }
    proc = subprocess.run(
        [sys.executable, "manage.py", "runworker", "--burst"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "ECHOMQ['LOG_FORMAT'] must be 'text' or 'json', not 'xml'" in proc.stderr
