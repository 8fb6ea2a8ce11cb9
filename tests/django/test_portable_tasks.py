"""``@task`` with EchoMQ's options on every stack, and under Django's own backends.

Django 6.0's decorator takes no extra options and Django's ImmediateBackend /
DummyBackend have no field for them, so ``echomq_django.compat.task`` (also
``echomq_django.task``) passes on what the backend's task class has a field for
and ignores the rest there, with one warning.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import django
import pytest
from django.test import override_settings

import echomq_django
from echomq_django.backends import EchoMQTask
from echomq_django.compat import (
    DUMMY_BACKEND,
    IMMEDIATE_BACKEND,
    Task,
    TaskOptionsIgnored,
    TaskResultStatus,
    task,
)

ROOT = Path(__file__).resolve().parents[2]


def double(x):
    return x * 2


def triple(x):
    return x * 3


@pytest.mark.parametrize("backend", [IMMEDIATE_BACKEND, DUMMY_BACKEND], ids=["immediate", "dummy"])
def test_echomq_options_are_ignored_by_djangos_backends_with_one_warning(backend):
    alias = f"portable-{backend.rsplit('.', 1)[-1]}"
    with override_settings(TASKS={alias: {"BACKEND": backend}}):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            built = []
            for f in (double, triple):  # a loop, not a comprehension: one frame on every Python
                built.append(
                    task(backend=alias, max_attempts=3, backoff=5, timeout=30, lease=10)(f)
                )
        assert [type(t) for t in built] == [Task, Task]
        [warning] = caught
        assert warning.category is TaskOptionsIgnored
        assert "backoff, lease, max_attempts, timeout" in str(warning.message)
        assert warning.filename == __file__  # points at the decorator's caller
        if backend == IMMEDIATE_BACKEND:  # (DummyBackend copies a Task by its path: not these)
            result = built[0].enqueue(21)
            assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)


def test_echomq_options_reach_an_echomq_task_and_a_misspelt_one_is_a_type_error():
    built = echomq_django.task(max_attempts=3, timeout=30, priority=4)(double)
    assert isinstance(built, EchoMQTask)
    assert (built.max_attempts, built.timeout, built.priority) == (3, 30, 4)
    with pytest.raises(TypeError, match="max_atempts"):
        task(max_atempts=3)(double)
    with pytest.raises(TypeError, match="run_after cannot be defined statically"):
        task(run_after=None)(double)


@pytest.mark.skipif(django.VERSION < (6, 1), reason="Django 6.1 passes extra options on")
def test_djangos_own_decorator_takes_echomq_options_on_61():
    from django.tasks import task as django_task

    built = django_task(max_attempts=2, backoff=1)(double)
    assert isinstance(built, EchoMQTask) and built.max_attempts == 2


def test_a_project_switching_its_tests_to_immediate_backend_imports_its_tasks():
    """A fresh process, as a test run with such settings starts: no TypeError at import."""
    code = (
        "import django; django.setup()\n"
        "from tests.django import tasks\n"
        "r = tasks.tuned.enqueue()\n"
        "print(type(tasks.tuned).__name__, r.status, r.return_value)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.django.settings_immediate"}
    proc = subprocess.run(
        [sys.executable, "-W", "always", "-c", code],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["Task", "SUCCESSFUL", "ok"]
    assert "TaskOptionsIgnored" in proc.stderr and "max_attempts" in proc.stderr
