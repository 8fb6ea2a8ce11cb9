"""The framework's contract end to end: enqueue -> the real engine Worker running
``execution.execute`` (in this process, so signals can be observed) -> get_result."""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from echomq_django.backends import EchoMQBackend
from echomq_django.compat import TaskResultStatus, task_enqueued, task_finished, task_started
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.worker import Failure, Success, Worker
from echomq_django.exceptions import PayloadError
from echomq_django.execution import execute
from tests.django import tasks

pytestmark = pytest.mark.django_db
QUEUES = ("default", "emails", "slow")


@pytest.fixture
def work(jobs):
    """Run a burst worker (concurrency 1) over the test queues until they are empty."""

    def run(name: str = "w1", **options) -> Worker:
        worker = Worker(jobs, QUEUES, execute, burst=True, name=name, idle_block_s=0.2, **options)
        worker.run()
        return worker

    return run


@pytest.fixture
def signals():
    """Every task signal as (signal, sender, status, attempts, worker_ids)."""
    seen: list[tuple] = []
    receivers = {}
    for name, signal in [
        ("enqueued", task_enqueued),
        ("started", task_started),
        ("finished", task_finished),
    ]:

        def receiver(sender, task_result, _name=name, **kwargs):
            seen.append((_name, sender, task_result.status, task_result.attempts))

        receivers[signal] = receiver
        signal.connect(receiver)
    yield seen
    for signal, receiver in receivers.items():
        signal.disconnect(receiver)


def test_success_stores_the_return_value(jobs, work):
    result = tasks.add.enqueue(2, 3)
    work(name="worker-a")
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.worker_ids == ["worker-a"] and result.attempts == 1 and result.errors == []
    assert result.enqueued_at <= result.started_at <= result.last_attempted_at <= result.finished_at
    assert tasks.add.get_result(result.id).return_value == 5


def test_a_raising_task_fails_after_max_attempts_with_each_error(jobs, work):
    result = tasks.fail.enqueue("boom")  # max_attempts=2, queue "emails"
    work()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 2 and len(result.errors) == 2
    for error in result.errors:
        assert error.exception_class_path == "builtins.ValueError"
        assert error.exception_class is ValueError
        assert (
            "raise ValueError(message)" in error.traceback and "ValueError: boom" in error.traceback
        )
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    assert jobs.get("emails", result.id).state == "dead"


def test_priority_order_higher_first(jobs, work):
    started = []

    def record(sender, task_result, **kwargs):
        started.append(task_result.args[0])

    for priority in (-10, 50, 0, 100, -100):
        tasks.echo.using(priority=priority).enqueue(priority)
    task_started.connect(record)
    try:
        work()  # one executor: jobs start one after another, in claim order
    finally:
        task_started.disconnect(record)
    assert started == [100, 50, 0, -10, -100]


def test_run_after_defers_and_never_blocks_ready_work(jobs, work):
    later = tasks.echo.using(priority=100, run_after=timezone.now() + timedelta(hours=1)).enqueue(
        "later"
    )
    soon = tasks.echo.using(run_after=timezone.now() + timedelta(milliseconds=400)).enqueue("soon")
    ready = tasks.echo.using(priority=-100).enqueue("ready")
    started = time.monotonic()
    work()  # burst: runs the ready job, exits while only future-deferred jobs remain
    assert time.monotonic() - started < 5
    assert tasks.echo.get_result(ready.id).status == TaskResultStatus.SUCCESSFUL
    assert tasks.echo.get_result(later.id).status == TaskResultStatus.READY
    time.sleep(0.5)
    work()
    assert tasks.echo.get_result(soon.id).status == TaskResultStatus.SUCCESSFUL
    assert tasks.echo.get_result(soon.id).started_at >= soon.task.run_after
    assert jobs.get("default", later.id).state == "scheduled"


def test_takes_context_sees_the_attempt_number(jobs, work):
    result = tasks.flaky.enqueue(2)
    work()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"attempt": 2, "id": result.id}
    assert result.attempts == 2
    assert [e.exception_class_path for e in result.errors] == ["builtins.RuntimeError"]


@pytest.mark.parametrize(("task", "args", "row_says"), [
    (tasks.flaky, [1], False),  # a deploy added `context`: the function gets one
    (tasks.add, [2, 3], True),  # a deploy removed it: the first argument stays one
])  # fmt: skip
def test_takes_context_is_the_codes_not_the_rows(jobs, work, task, args, row_says):
    """A job enqueued before a deploy changed the task's signature runs the function as it
    is now written; the row's flag passed its first argument as the context."""
    result = task.enqueue(*args)
    key = QueueKeys.of("default").job(result.id)
    payload = json.loads(jobs.connector.client.hget(key, "payload"))
    jobs.connector.client.hset(key, "payload", json.dumps({**payload, "takes_context": row_says}))
    work()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL, result.errors
    assert result.return_value == (5 if task is tasks.add else {"attempt": 1, "id": result.id})


def test_an_async_task_runs(jobs, work):
    results = [tasks.async_add.enqueue(i, 1) for i in range(3)]
    work()
    assert [tasks.async_add.get_result(r.id).return_value for r in results] == [1, 2, 3]


def test_signals_fire_in_order_with_the_right_statuses(jobs, work, signals):
    ok = tasks.add.enqueue(1, 1)
    work()
    bad = tasks.fail.enqueue("x")
    work()
    assert ok.id != bad.id
    R, F, S, Q = (TaskResultStatus.RUNNING, TaskResultStatus.FAILED, TaskResultStatus.SUCCESSFUL,
                  TaskResultStatus.READY)  # fmt: skip
    assert signals == [
        ("enqueued", EchoMQBackend, Q, 0),
        ("started", EchoMQBackend, R, 1),
        ("finished", EchoMQBackend, S, 1),
        ("enqueued", EchoMQBackend, Q, 0),
        ("started", EchoMQBackend, R, 1),  # the first failure is retried: not finished
        ("started", EchoMQBackend, R, 2),
        ("finished", EchoMQBackend, F, 2),
    ]


def test_finished_at_is_on_the_servers_clock_as_started_at_is(jobs, work, monkeypatch):
    """A worker whose clock is an hour behind the server's: the results its
    ``task_finished`` carries still end after they began, within the run's length, as
    the stored rows do (both ends on the server's clock)."""
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() - timedelta(hours=1))
    finished = []

    def receiver(sender, task_result, **kwargs):
        finished.append(task_result)

    task_finished.connect(receiver)
    try:
        added, failed = tasks.add.enqueue(2, 3), tasks.fail.enqueue("boom")
        work()
    finally:
        task_finished.disconnect(receiver)
    assert {r.id for r in finished} == {added.id, failed.id}  # fail's last attempt only
    for seen in finished:
        assert seen.started_at <= seen.last_attempted_at <= seen.finished_at
        assert seen.finished_at - seen.last_attempted_at < timedelta(seconds=5)
        stored = tasks.add.get_backend().get_result(seen.id)
        assert abs(stored.finished_at - seen.finished_at) < timedelta(seconds=5)


def test_the_plugins_drain_times_each_attempt_on_the_servers_clock(jobs):
    """The pytest plugin's ``drain()`` runs a job as a worker does: a retried job's last
    attempt starts and finishes when it ran, not at the previous attempt's time."""
    from echomq_django.testing.queues import TestQueues

    finished = []

    def receiver(sender, task_result, **kwargs):
        finished.append(task_result)

    queues = TestQueues(jobs)
    result = tasks.picky.enqueue("reset")  # 3 attempts, retried at once on "reset"
    task_finished.connect(receiver)
    try:
        queues.drain(max_jobs=2)  # attempts 1 and 2
        time.sleep(1.0)  # the gap a backoff makes between attempts
        before = timezone.now()
        queues.drain()  # attempt 3: dead, task_finished sent
    finally:
        task_finished.disconnect(receiver)
    (seen,) = finished
    stored = tasks.picky.get_result(result.id)
    assert seen.last_attempted_at >= before - timedelta(seconds=0.5)
    assert seen.last_attempted_at <= seen.finished_at
    assert abs(stored.finished_at - seen.finished_at) < timedelta(seconds=0.5)


def test_failed_task_finished_is_sent_inside_the_except_block(jobs, work):
    exc_infos = []

    def receiver(sender, task_result, **kwargs):
        exc_infos.append(sys.exc_info()[0])

    task_finished.connect(receiver)
    try:
        tasks.exits.enqueue()
        work()
    finally:
        task_finished.disconnect(receiver)
    assert exc_infos == [SystemExit]


@pytest.mark.parametrize(
    ("task", "class_path"),
    [
        (tasks.exits, "builtins.SystemExit"),
        (tasks.interrupted, "builtins.KeyboardInterrupt"),
        (tasks.returns_a_set, "echomq_django.execution.NonJSONReturnValue"),
        (tasks.raises_unprintable, "tests.django.tasks.Unprintable"),
    ],
    ids=["sys.exit", "KeyboardInterrupt", "non-JSON-return", "str()-raises"],
)
def test_bad_endings_fail_the_task_and_the_worker_carries_on(jobs, work, task, class_path):
    bad = task.enqueue()
    after = tasks.add.using(priority=-1).enqueue(1, 2)
    worker = work()
    bad_result = task.get_result(bad.id)
    assert bad_result.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in bad_result.errors] == [class_path]
    assert tasks.add.get_result(after.id).return_value == 3
    assert worker.stats.completed == 1


def test_non_json_return_value_is_not_retried(jobs):
    result = tasks.returns_a_set.enqueue()  # max_attempts=1: nothing to retry anyway
    claimed = jobs.claim("default", "w1").jobs[0]
    outcome = execute(claimed)
    assert isinstance(outcome, Failure) and outcome.retry is False
    assert "cannot be stored as JSON" in outcome.summary
    assert json.loads(outcome.error)["exception_class_path"].endswith("NonJSONReturnValue")
    assert result.id == claimed.id


def test_a_return_value_over_the_payload_limit_fails_and_is_not_retried(jobs, monkeypatch):
    """Unbounded, a result bloated the server for its retention; past the server's bulk limit
    every complete was refused and the worker's patient flush re-sent it for ever."""
    tasks.repeat.enqueue("x", 2000)
    monkeypatch.setattr(jobs, "max_payload", 1000)
    outcome = execute(jobs.claim("default", "w1").jobs[0])
    assert isinstance(outcome, Failure) and outcome.retry is False
    assert "1000" in outcome.summary
    assert json.loads(outcome.error)["exception_class_path"].endswith("ReturnValueTooLarge")
    tasks.repeat.enqueue("x", 900)
    assert execute(jobs.claim("default", "w1").jobs[0]) == Success(json.dumps("x" * 900))


def test_retry_backoff_per_task_and_per_backend(jobs):
    tasks.tuned.enqueue(fails=True)  # max_attempts=4, backoff=0.25
    tasks.add.enqueue(1, None)  # no max_attempts: the default, 1 (no retry)
    tasks.fail.enqueue("x")  # max_attempts=2, the backend's BACKOFF: 0
    claimed = [*jobs.claim("default", "w1", count=2).jobs, *jobs.claim("emails", "w1").jobs]
    outcomes = [execute(c) for c in claimed]
    assert [(type(o), o.retry, o.backoff_ms) for o in outcomes] == [
        (Failure, True, 250),
        (Failure, False, None),
        (Failure, True, 0),
    ]
    assert (
        outcomes[1].summary == "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'"
    )


def test_success_outcome_is_the_json_return_value(jobs):
    tasks.echo.enqueue(1, x={"y": (2, 3)})
    assert execute(jobs.claim("default", "w1").jobs[0]) == Success(
        '{"args":[1],"kwargs":{"x":{"y":[2,3]}}}'
    )


def planted(jobs, payload: str, task: str = "os.system") -> str:
    """A row written straight to the server, as an attacker with write access could."""
    return jobs.enqueue("default", NewJob(payload=payload, task=task)).id


def test_a_row_naming_anything_but_a_loaded_task_is_dead_and_never_called(jobs, work, tmp_path):
    marker = tmp_path / "pwned"
    body = {"v": 1, "args": [f"touch {marker}"], "kwargs": {}, "backend": "default"}
    ids = {
        "os.system": planted(jobs, json.dumps({**body, "task": "os.system"})),
        "unloaded module": planted(jobs, json.dumps({**body, "task": "antigravity.fly"})),
        "a plain function": planted(
            jobs, json.dumps({**body, "task": "tests.django.test_execution.planted"})
        ),
        "not json": planted(jobs, "{not json"),
        "unknown backend": planted(
            jobs, json.dumps({**body, "task": "tests.django.tasks.add", "backend": "nope"})
        ),
    }
    work()
    assert not marker.exists()
    assert "antigravity" not in sys.modules
    for what, job_id in ids.items():
        row = jobs.get("default", job_id)
        assert row.state == "dead", what
        assert row.attempts == 1, what  # refused at once, never retried
    reason = jobs.get("default", ids["os.system"]).last_error
    assert reason.startswith("UnknownTask: 'os.system' is not a Task object loaded in this process")


def test_a_failing_signal_receiver_never_changes_the_outcome(jobs, work):
    def broken(sender, task_result, **kwargs):
        raise RuntimeError("receiver bug")

    task_finished.connect(broken)
    try:
        result = tasks.add.enqueue(1, 2)
        work()
    finally:
        task_finished.disconnect(broken)
    assert tasks.add.get_result(result.id).return_value == 3


def test_resolution_never_triggers_a_module_getattr_hook(jobs, work):
    import types

    calls = []
    lazy = types.ModuleType("echomq_lazy_module")
    lazy.__getattr__ = lambda name: calls.append(name)
    sys.modules[lazy.__name__] = lazy
    try:
        body = {"v": 1, "args": [], "kwargs": {}, "backend": "default"}
        job_id = planted(jobs, json.dumps({**body, "task": "echomq_lazy_module.anything"}))
        work()
    finally:
        del sys.modules[lazy.__name__]
    assert calls == []
    assert jobs.get("default", job_id).state == "dead"


def test_reading_a_row_that_names_an_unconfigured_backend_is_a_payload_error(jobs):
    """Not ImproperlyConfigured: this project's settings are fine, the row is not."""
    body = {"v": 1, "task": "tests.django.tasks.add", "args": [1, 2], "kwargs": {}}
    job_id = planted(jobs, json.dumps({**body, "backend": "nope"}))
    with pytest.raises(PayloadError, match="'nope'"):
        tasks.add.get_result(job_id)
