"""Failures and retries as Django means them: FAILED at once unless the task opts in.

Enqueue -> the real engine Worker running ``execution.execute`` in this process
(so signals and what a backoff callable saw can be observed) -> get_result.
A retry that waits is brought forward with ``jobs.run_now`` (an operator's
action) instead of sleeping through its delay.
"""

from __future__ import annotations

import sys

import pytest

from echomq_django import Retry
from echomq_django.compat import TaskResultStatus, task_finished
from echomq_django.engine.worker import Failure, Worker
from echomq_django.execution import execute
from tests.django import tasks

pytestmark = pytest.mark.django_db
QUEUES = ("default", "emails", "slow")


@pytest.fixture
def work(jobs):
    """A burst worker over the test queues; returns the outcomes it got, in order."""

    def run() -> list:
        outcomes = []

        def handler(claimed):
            outcomes.append(execute(claimed))
            return outcomes[-1]

        Worker(jobs, QUEUES, handler, burst=True, name="w1", idle_block_s=0.2).run()
        return outcomes

    return run


@pytest.fixture
def finished():
    """(status, attempts, exception type being handled) for every task_finished."""
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((task_result.status, task_result.attempts, sys.exc_info()[0]))

    task_finished.connect(receiver)
    yield seen
    task_finished.disconnect(receiver)


@pytest.mark.parametrize(
    ("enqueue", "class_path"),
    [
        (lambda: tasks.add.enqueue(1, None), "builtins.TypeError"),
        (lambda: tasks.long_traceback.enqueue(400), "tests.django.tasks.Unlucky"),
        (lambda: tasks.exits.enqueue(), "builtins.SystemExit"),
    ],
    ids=["TypeError", "custom-exception-long-traceback", "SystemExit"],
)
def test_a_raising_task_is_failed_at_once_by_default(jobs, work, finished, enqueue, class_path):
    result = enqueue()
    [outcome] = work()
    assert isinstance(outcome, Failure) and outcome.retry is False
    result.refresh()
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 1)
    assert [e.exception_class_path for e in result.errors] == [class_path]
    assert result.finished_at is not None
    [(status, attempts, handling)] = finished
    assert (status, attempts) == (TaskResultStatus.FAILED, 1)
    assert handling is not None and f"{handling.__module__}.{handling.__qualname__}" == class_path


def test_while_a_retry_waits_the_result_is_ready_with_the_errors_so_far(jobs, work, finished):
    waiting = tasks.patient.enqueue()  # max_attempts=2, backoff=60
    result = tasks.fail.enqueue("once")  # max_attempts=2, the backend's BACKOFF (0)
    work()
    waiting.refresh()
    assert (waiting.status, waiting.attempts, waiting.finished_at) == (
        TaskResultStatus.READY, 1, None
    )  # fmt: skip
    assert [e.exception_class_path for e in waiting.errors] == ["tests.django.tasks.Unlucky"]
    row = jobs.get("default", waiting.id)
    assert row.state == "scheduled" and row.max_attempts == 2
    result.refresh()  # retried at once, then out of attempts
    assert (result.status, result.attempts, len(result.errors)) == (TaskResultStatus.FAILED, 2, 2)
    assert [(s, a) for s, a, _ in finished] == [(TaskResultStatus.FAILED, 2)]  # once, at the end


def test_exception_filters_decide_what_is_retried(jobs, work, finished):
    reset, refused, value = (tasks.picky.enqueue(k) for k in ("reset", "refused", "value"))
    work()
    attempts = {k: tasks.picky.get_result(r.id).attempts for k, r in
                {"reset": reset, "refused": refused, "value": value}.items()}  # fmt: skip
    assert attempts == {"reset": 3, "refused": 1, "value": 1}
    assert all(tasks.picky.get_result(r.id).status == TaskResultStatus.FAILED
               for r in (reset, refused, value))  # fmt: skip
    assert len(finished) == 3


def test_a_backoff_callable_sees_the_failed_attempt_and_none_ends_the_retries(jobs, work):
    tasks.BACKOFF_CALLS.clear()
    result = tasks.backs_off.enqueue()  # max_attempts=5, but the callable stops at 3
    delays = []
    for _ in range(3):
        outcomes = work()
        delays += [o.backoff_ms for o in outcomes if o.retry]
        if jobs.get("default", result.id).state == "scheduled":
            jobs.run_now("default", result.id)
    assert delays == [100, 200]
    unlucky = "tests.django.tasks.Unlucky"
    calls = tasks.BACKOFF_CALLS
    assert calls == [
        ("Unlucky", TaskResultStatus.FAILED, 1, [unlucky]),
        ("Unlucky", TaskResultStatus.FAILED, 2, [unlucky] * 2),
        ("Unlucky", TaskResultStatus.FAILED, 3, [unlucky] * 3),
    ]
    result.refresh()
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 3)


def test_task_code_asks_for_a_retry_with_its_own_delay(jobs, work):
    soon = tasks.asks_to_retry.enqueue(2, 0)
    later = tasks.asks_to_retry.enqueue(2, 30)
    never = tasks.asks_to_retry.enqueue(9, 0)  # asks every time: bounded by max_attempts=3
    outcomes = work()
    assert sorted(o.backoff_ms for o in outcomes if isinstance(o, Failure) and o.retry) == [
        0, 0, 0, 30_000
    ]  # fmt: skip
    assert tasks.asks_to_retry.get_result(soon.id).return_value == 2
    waiting = tasks.asks_to_retry.get_result(later.id)
    assert (waiting.status, waiting.attempts) == (TaskResultStatus.READY, 1)
    assert jobs.get("default", later.id).state == "scheduled"
    exhausted = tasks.asks_to_retry.get_result(never.id)
    assert (exhausted.status, exhausted.attempts) == (TaskResultStatus.FAILED, 3)
    assert {e.exception_class_path for e in exhausted.errors} == {"echomq_django.retries.Retry"}
    assert "not ready at attempt 3" in exhausted.errors[-1].traceback


def test_retry_refuses_a_bad_delay():
    for delay in (-1, float("nan"), "soon", 10**30):
        with pytest.raises(ValueError, match="Retry"):
            Retry(delay=delay)


def test_started_at_is_the_first_run_and_last_attempted_at_the_latest(jobs, work):
    result = tasks.flaky.enqueue(2)  # fails on attempt 1, succeeds on attempt 2
    work()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.attempts == len(result.worker_ids) == 2 and len(result.errors) == 1
    assert result.enqueued_at <= result.started_at < result.last_attempted_at <= result.finished_at


def test_read_ahead_jobs_are_stamped_when_each_starts_not_when_claimed(jobs):
    """Short jobs are claimed many at a time and run one after another (concurrency 1):
    ordered by started_at they must come out in priority order, each its own moment.
    A stamp is exact to within one call's latency (the server stamps "now minus how
    long ago it began"): each job naps 30 ms, a margin a loaded machine holds."""
    priorities = [3, -7, 9, 0, 12, -2, 5, 1, -11, 7, 2, 10, -4, 6, 4]
    results = [tasks.nap.using(priority=p).enqueue(0.03) for p in priorities]
    Worker(jobs, QUEUES, execute, burst=True, name="w1", concurrency=1).run()
    done = [tasks.nap.get_result(r.id) for r in results]
    assert len({r.started_at for r in done}) == len(done)  # no two share a stamp
    by_start = [r.task.priority for r in sorted(done, key=lambda r: r.started_at)]
    assert by_start == sorted(priorities, reverse=True)


def test_backend_wide_max_attempts_and_backoff_callable(settings, jobs):
    seen = []

    def backoff(exception, task_result):
        seen.append((type(exception).__name__, task_result.attempts))
        return 7

    settings.TASKS = {
        "default": {
            **settings.TASKS["default"],
            "OPTIONS": {"TASK_MODULES": ["tests.django.tasks"], "MAX_ATTEMPTS": 3,
                        "BACKOFF": backoff},
        }
    }  # fmt: skip
    result = tasks.add.enqueue(1, None)  # no options of its own: the backend's
    assert jobs.get("default", result.id).max_attempts == 3
    outcome = execute(jobs.claim("default", "w1", start_now=1).jobs[0])  # its run began
    assert (outcome.retry, outcome.backoff_ms) == (True, 7000)
    assert seen == [("TypeError", 1)]
    tasks.tuned.enqueue(fails=True)  # its own backoff (0.25 s) wins over the backend's
    assert execute(jobs.claim("default", "w1").jobs[0]).backoff_ms == 250


def test_using_cannot_change_the_retry_options():
    with pytest.raises(TypeError):
        tasks.tuned.using(max_attempts=9)
    with pytest.raises(TypeError):
        tasks.tuned.using(backoff=1)
