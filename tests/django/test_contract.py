"""The same backend-agnostic contract, run on EchoMQ and on Django's ImmediateBackend.

Each run enqueues every scenario once, then (EchoMQ) one real ``manage.py
runworker --burst`` process runs them on a real server, its task signals written
to a file by the test app (``tests/django/taskapp/apps.py``); ImmediateBackend
runs each at ``enqueue``. Every test below then asserts what a project written
against ``django.tasks`` may rely on, on both. Where EchoMQ differs, the test
says so, and so does the README ("Differences from Django's reference backends"):

* ``run_after``: ImmediateBackend cannot defer (InvalidTask); EchoMQ keeps the job READY.
* ``args``/``kwargs`` come back as JSON (lists, string keys); ImmediateBackend keeps
  the caller's objects. Return values are JSON on both.
* Order: ImmediateBackend runs at enqueue; EchoMQ runs by priority, then FIFO.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.test import override_settings
from django.utils import timezone

from echomq_django import conf
from echomq_django.compat import (
    IMMEDIATE_BACKEND,
    InvalidTask,
    TaskResult,
    TaskResultStatus,
    task_enqueued,
    task_finished,
    task_started,
)
from tests.django import settings as echomq_settings
from tests.django.taskapp import coros, jobs
from tests.django.taskapp.apps import signal_entry
from tests.django.taskapp.tasks import emails

ROOT = Path(__file__).resolve().parents[2]
ECHOMQ_BACKEND = "echomq_django.backends.EchoMQBackend"
QUEUES = ["default", "emails", "slow"]
WORKER = "contract-worker"
PRIORITIES = (0, 1, 10, 50, 100)  # enqueued in this order

SCENARIOS = {
    "ok": (jobs.add, (2, 3), {}),
    "json": (jobs.echo, (1,), {"x": {"y": (2, 3)}, "n": None}),
    "raises": (jobs.fails, ("kaput",), {}),
    "custom": (jobs.unlucky, ("no luck",), {}),
    "exits": (jobs.exits, (3,), {}),
    "deep": (jobs.deep, (300,), {}),
    "context": (jobs.with_context, ("v",), {}),
    "async": (coros.async_add, (1, 2), {}),
    "email": (emails.send, ("a@example.com",), {}),
    "options": (jobs.tuned, (21,), {}),
    **{f"priority{p}": (jobs.echo.using(priority=p), (p,), {}) for p in PRIORITIES},
}


@dataclass
class Run:
    kind: str
    backend: str  # the TASKS BACKEND path: the signals' sender
    results: dict[str, TaskResult]
    signals: list[dict] = field(default_factory=list)
    deferred: dict[str, TaskResult] = field(default_factory=dict)  # EchoMQ only: run_after

    def signals_of(self, result: TaskResult) -> list[dict]:
        return [s for s in self.signals if s["id"] == result.id]


def record_signals(seen: list[dict]):
    receivers = {}
    for name, signal in (
        ("enqueued", task_enqueued),
        ("started", task_started),
        ("finished", task_finished),
    ):

        def receiver(sender, task_result, _name=name, **kwargs):
            seen.append(signal_entry(_name, sender, task_result))

        signal.connect(receiver)
        receivers[signal] = receiver
    return receivers


def enqueue_all() -> dict[str, TaskResult]:
    return {name: t.enqueue(*args, **kwargs) for name, (t, args, kwargs) in SCENARIOS.items()}


def run_echomq(url: str, tmp: Path) -> Run:
    seen: list[dict] = []
    receivers = record_signals(seen)
    try:
        enqueued = enqueue_all()
        deferred = {
            "in an hour": jobs.add.using(run_after=timezone.now() + timedelta(hours=1)),
            "timedelta": jobs.add.using(run_after=timedelta(minutes=30)),
        }
        deferred = {name: t.enqueue(1, 1) for name, t in deferred.items()}
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)
    log = tmp / "signals.jsonl"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.django.settings",
        "ECHOMQ_TEST_URL": url,
        "ECHOMQ_SIGNAL_LOG": str(log),
    }
    proc = subprocess.run(
        [sys.executable, "manage.py", "runworker", *QUEUES, "--burst", "--concurrency", "1",
         "--name", WORKER],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    seen += [json.loads(line) for line in log.read_text().splitlines()]
    results = {name: r.task.get_result(r.id) for name, r in enqueued.items()}
    deferred = {name: r.task.get_result(r.id) for name, r in deferred.items()}
    return Run("echomq", ECHOMQ_BACKEND, results, seen, deferred)


def run_immediate() -> Run:
    seen: list[dict] = []
    receivers = record_signals(seen)
    try:
        results = enqueue_all()
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)
    return Run("immediate", IMMEDIATE_BACKEND, results, seen)


@pytest.fixture(scope="module", params=["echomq", "immediate"])
def run(request, tmp_path_factory):
    if request.param == "echomq":
        url = request.getfixturevalue("valkey_server").url
        redis.Redis.from_url(url).flushall()
        overrides = {"ECHOMQ": {"URL": url}, "TASKS": echomq_settings.TASKS}
    else:
        overrides = {"TASKS": {"default": {"BACKEND": IMMEDIATE_BACKEND, "QUEUES": QUEUES}}}
    with override_settings(**overrides):
        conf.reset()
        try:
            if request.param == "echomq":
                yield run_echomq(url, tmp_path_factory.mktemp("contract"))
            else:
                yield run_immediate()
        finally:
            conf.reset()


def test_statuses_and_return_values(run):
    r = run.results
    ok = TaskResultStatus.SUCCESSFUL
    assert (r["ok"].status, r["ok"].return_value) == (ok, 5)
    assert r["json"].return_value == {"args": [1], "kwargs": {"x": {"y": [2, 3]}, "n": None}}
    assert (r["async"].status, r["async"].return_value) == (ok, 3)
    assert (r["email"].status, r["email"].return_value) == (ok, "sent to a@example.com")
    assert r["options"].return_value == 42
    for result in r.values():
        assert result.backend == "default"
        assert result.is_finished


def test_a_raising_task_is_failed_at_once_with_its_error(run):
    for name, class_path, text in [
        ("raises", "builtins.ValueError", "ValueError: kaput"),
        ("custom", "tests.django.taskapp.jobs.Unlucky", "Unlucky: no luck"),
        ("exits", "builtins.SystemExit", "SystemExit: 3"),
        ("deep", "tests.django.taskapp.jobs.Unlucky", "Unlucky: at the bottom"),
    ]:
        result = run.results[name]
        assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 1), name
        [error] = result.errors
        assert error.exception_class_path == class_path
        assert text in error.traceback
        with pytest.raises(ValueError, match="Task failed"):
            _ = result.return_value


def test_takes_context_sees_the_attempt_and_the_result(run):
    result = run.results["context"]
    assert result.return_value == {"attempt": 1, "id": result.id, "value": "v"}


def test_worker_ids_count_the_attempts(run):
    workers = set()
    for result in run.results.values():
        assert len(result.worker_ids) == result.attempts == 1
        workers.update(result.worker_ids)
    [worker] = workers  # one worker ran them all
    assert isinstance(worker, str) and worker
    if run.kind == "echomq":
        assert worker == WORKER


def test_timestamps_are_aware_and_ordered(run):
    for name, result in run.results.items():
        times = (result.enqueued_at, result.started_at, result.last_attempted_at,
                 result.finished_at)  # fmt: skip
        assert all(t is not None and timezone.is_aware(t) for t in times), name
        assert result.enqueued_at <= result.started_at <= result.finished_at, name
        assert result.started_at == result.last_attempted_at, name  # one attempt


def test_signals_per_task_in_order_with_the_backend_as_sender(run):
    for name, result in run.results.items():
        signals = run.signals_of(result)
        assert [(s["signal"], s["status"]) for s in signals] == [
            ("enqueued", "READY"),
            ("started", "RUNNING"),
            ("finished", str(result.status)),
        ], name
        assert {s["sender"] for s in signals} == {run.backend}, name
        assert [s["attempts"] for s in signals] == [0, 1, 1], name
        assert [s["worker_ids"] for s in signals][1:] == [result.worker_ids] * 2, name


def test_priority_and_queue_name_are_kept(run):
    for p in PRIORITIES:
        assert run.results[f"priority{p}"].task.priority == p
    assert run.results["email"].task.queue_name == "emails"
    assert run.results["email"].task.priority == 10
    assert run.results["ok"].task.queue_name == "default"


def test_started_at_follows_the_priority_order(run):
    """EchoMQ starts higher priorities first; ImmediateBackend runs each at enqueue."""
    started = sorted(PRIORITIES, key=lambda p: run.results[f"priority{p}"].started_at)
    expected = sorted(PRIORITIES, reverse=True) if run.kind == "echomq" else list(PRIORITIES)
    assert started == expected


def test_run_after(run):
    later = timezone.now() + timedelta(hours=1)
    if run.kind == "immediate":  # documented: Django's ImmediateBackend cannot defer
        with pytest.raises(InvalidTask, match="run_after"):
            jobs.add.using(run_after=later)
        return
    for name, result in run.deferred.items():  # the worker ran, and left them waiting
        assert (result.status, result.started_at, result.worker_ids) == (
            TaskResultStatus.READY, None, []
        ), name  # fmt: skip
        assert result.task.run_after > result.enqueued_at + timedelta(minutes=29), name
    deferred = jobs.add.using(run_after=later)
    assert deferred.run_after == later
    relative = jobs.add.using(run_after=timedelta(minutes=5))
    assert timedelta(minutes=4) < relative.run_after - timezone.now() <= timedelta(minutes=5)
    naive = timezone.make_naive(later)
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        jobs.add.using(run_after=naive)
