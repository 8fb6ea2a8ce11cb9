"""Tests that do not ask for the database, in a project whose settings use the outbox."""

from shop.tasks import broken, send_receipt


def test_jobs_and_drain_need_no_database_for_jobs_sent_at_once(echomq):
    """Nothing such a test enqueued is in the outbox table: it is not read (pytest-django
    refuses the access, and the test would fail on what it never asked for)."""
    send_receipt.enqueue(1)  # a task of the "default" backend, ENQUEUE_ON_COMMIT False
    assert [j.args for j in echomq.jobs()] == [[1]]
    broken.enqueue()
    assert [j.outcome for j in echomq.drain(queue="default")] == ["dead"]
    echomq.assert_empty(queue="default")
