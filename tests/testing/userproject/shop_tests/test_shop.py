"""A user's tests, written as docs/testing.md shows: the plugin's own acceptance tests."""

from datetime import timedelta

import pytest
from django.utils import timezone
from shop.models import Order
from shop.tasks import (
    broken,
    charge,
    cleanup,
    divide_quietly,
    notify,
    register,
    register_quietly,
    send_receipt,
)

from echomq_django.compat import TaskResultStatus

pytestmark = pytest.mark.django_db  # plain django_db: drain() runs in the test's transaction


def test_starts_empty_and_never_sees_the_dev_servers_jobs(echomq):
    assert echomq.jobs() == []
    echomq.assert_empty()


def test_a_view_enqueues_and_drain_runs_the_jobs(
    client, echomq, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/orders/", {"email": "a@example.com"})
    order = Order.objects.get()
    queued = echomq.jobs()
    assert [(j.task, j.args) for j in queued] == [
        ("shop.tasks.notify", [order.pk]),
        ("shop.tasks.archive", [order.pk]),
        ("shop.tasks.send_receipt", [order.pk]),
    ]  # queues in name order: default, then mail
    assert not Order.objects.get().receipt_sent  # nothing ran yet
    ran = echomq.drain()
    assert sorted(j.outcome for j in ran) == ["completed"] * 3
    order.refresh_from_db()
    assert (order.receipt_sent, order.notified, order.archived) == (True, True, True)
    result = send_receipt.get_result(response.json()["receipt_job"])
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == f"receipt for {order.pk}"
    echomq.assert_empty()


def test_on_commit_jobs_wait_for_the_commit(client, echomq):
    client.post("/orders/", {"email": "b@example.com"})
    # The test's transaction never commits: the on_commit job was never sent.
    assert [j.task for j in echomq.jobs(queue="default")] == ["shop.tasks.archive"]
    assert echomq.jobs(task=notify) == []


@pytest.mark.django_db(transaction=True)
def test_on_commit_jobs_in_a_transactional_test(client, echomq):
    client.post("/orders/", {"email": "c@example.com"})
    assert len(echomq.jobs(task=notify)) == 1
    echomq.drain()
    assert Order.objects.get().notified


def test_a_failing_task_is_failed_and_reraise_brings_its_exception(echomq):
    result = broken.enqueue()
    (ran,) = echomq.drain()
    assert (ran.outcome, ran.error) == ("dead", "ValueError: broken on purpose")
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class_path == "builtins.ValueError"
    broken.enqueue()
    with pytest.raises(ValueError, match="broken on purpose"):
        echomq.drain(reraise=True)
    echomq.assert_empty()  # its attempt was recorded before the exception came up


def test_a_tasks_failed_sql_leaves_the_tests_transaction_usable(echomq):
    """On PostgreSQL a refused statement aborts the transaction it is in, here the
    test's own: drain() keeps it to the job that sent it, as a worker's autocommit does."""
    order = Order.objects.create(email="a@example.com")
    register.enqueue(order.pk)
    register_quietly.enqueue(order.pk)
    divide_quietly.enqueue()
    send_receipt.enqueue(order.pk)
    ran = echomq.drain()
    assert [(r.task, r.outcome) for r in ran] == [
        ("shop.tasks.register", "dead"),
        ("shop.tasks.register_quietly", "completed"),
        ("shop.tasks.divide_quietly", "completed"),
        ("shop.tasks.send_receipt", "completed"),
    ]
    assert ran[0].error.startswith("IntegrityError")
    order.refresh_from_db()
    assert order.receipt_sent  # the job after them ran, and its write stays
    assert Order.objects.count() == 1


def test_retries_with_backoff_run_at_once_with_run_due(echomq):
    order = Order.objects.create(email="d@example.com")
    result = charge.enqueue(order.pk, fail_times=2)
    (first,) = echomq.drain()
    assert (first.outcome, first.error) == ("scheduled", "CardDeclined: try 1")
    (waiting,) = echomq.jobs(task=charge)
    assert waiting.state == "scheduled"
    assert waiting.run_after > timezone.now() + timedelta(minutes=4)  # the task's backoff
    assert echomq.drain() == []  # not due: nothing runs
    ran = echomq.drain(run_due=True)
    assert [j.outcome for j in ran] == ["scheduled", "completed"]
    result.refresh()
    assert (result.status, result.return_value, result.attempts) == (
        TaskResultStatus.SUCCESSFUL,
        3,
        3,
    )


def test_retries_end_dead_past_max_attempts(echomq):
    order = Order.objects.create(email="e@example.com")
    charge.enqueue(order.pk, fail_times=10)
    ran = echomq.drain(run_due=True)
    assert [j.outcome for j in ran] == ["scheduled", "scheduled", "dead"]
    assert Order.objects.get().charge_tries == 3


def test_scheduled_jobs_and_jobs_fields(echomq):
    later = timezone.now() + timedelta(days=1)
    send_receipt.using(run_after=later, priority=7).enqueue(42)
    (job,) = echomq.jobs(task="shop.tasks.send_receipt", queue="mail")
    assert (job.args, job.kwargs, job.priority, job.state) == ([42], {}, 7, "scheduled")
    assert abs(job.run_after - later) < timedelta(milliseconds=1)
    assert echomq.drain() == []
    with pytest.raises(AssertionError, match="1 job"):
        echomq.assert_empty()
    assert [j.task for j in echomq.drain(run_due=True)] == ["shop.tasks.send_receipt"]


def test_drain_stops_after_max_jobs(echomq):
    for n in range(3):
        send_receipt.enqueue(n)
    assert len(echomq.drain(max_jobs=2)) == 2
    assert [j.args for j in echomq.jobs()] == [[2]]


def test_a_periodic_schedule(echomq):
    Order.objects.create(email="f@example.com", receipt_sent=True)
    job_id = echomq.run_schedule("cleanup")
    (ran,) = echomq.drain()
    assert (ran.id, ran.task, ran.outcome) == (job_id, "shop.tasks.cleanup", "completed")
    assert cleanup.get_result(job_id).return_value == 1
    assert not Order.objects.exists()


def test_drain_sends_the_frameworks_signals(echomq):
    from echomq_django.compat import task_finished, task_started

    seen = []

    def on_started(sender, task_result, **kwargs):
        seen.append(("started", task_result.id, task_result.status))

    def on_finished(sender, task_result, **kwargs):
        seen.append(("finished", task_result.id, task_result.status))

    task_started.connect(on_started)
    task_finished.connect(on_finished)
    try:
        result = send_receipt.enqueue(7)
        echomq.drain()
    finally:
        task_started.disconnect(on_started)
        task_finished.disconnect(on_finished)
    assert seen == [
        ("started", result.id, TaskResultStatus.RUNNING),
        ("finished", result.id, TaskResultStatus.SUCCESSFUL),
    ]


def test_drain_stops_at_its_limit_when_a_task_enqueues_itself(echomq, monkeypatch):
    from shop.tasks import forever

    from echomq_django.testing import queues

    monkeypatch.setattr(queues, "DRAIN_LIMIT", 5)  # 10,000 by default
    forever.enqueue(0)
    with pytest.raises(queues.DrainLimitReached, match="ran 5 jobs and more are ready"):
        echomq.drain()
    assert [j.args for j in echomq.jobs(task=forever)] == [[5]]
    assert len(echomq.drain(max_jobs=3)) == 3  # bounded on purpose: no error
