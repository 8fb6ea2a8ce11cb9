"""A task_enqueued receiver that raises loses no job and no other job's signal: each job
is stored first, then signalled, a receiver's error logged (review of Django's Tasks
contract, D2)."""

from __future__ import annotations

import logging

import pytest
from django.db import transaction

from echomq_django import conf
from echomq_django.compat import TaskResultStatus
from tests.django import tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def on_commit(echomq, settings):
    default = settings.TASKS["default"]
    options = {**default["OPTIONS"], "ENQUEUE_ON_COMMIT": True}
    settings.TASKS = {"default": {**default, "OPTIONS": options}}


@pytest.mark.django_db(transaction=True)
def test_on_commit_every_job_of_the_transaction_is_stored_and_signalled(
    on_commit, enqueued_past_a_broken_receiver, caplog
):
    """Before, the first job's callback raised and Django ran none of the others."""
    with caplog.at_level(logging.ERROR, "echomq.enqueue"), transaction.atomic():
        first, second = tasks.add.enqueue(1, 2), tasks.add.enqueue(3, 4)
    for result in (first, second):
        assert tasks.add.get_result(result.id).status == TaskResultStatus.READY
        assert result.enqueued_at is not None
    assert enqueued_past_a_broken_receiver == [first.id, second.id]
    logged = [r for r in caplog.records if r.name == "echomq.enqueue"]
    assert [r.exc_info[1].args for r in logged] == [("receiver bug",)] * 2
    assert first.id in logged[0].getMessage()


def test_enqueue_many_hands_back_every_result_each_signalled(
    echomq, jobs, enqueued_past_a_broken_receiver
):
    results = tasks.add.get_backend().enqueue_many(tasks.add, [((i, i), {}) for i in range(3)])
    assert enqueued_past_a_broken_receiver == [r.id for r in results]
    assert all(r.enqueued_at is not None for r in results)
    assert jobs.stats("default").counts["pending"] == 3


def test_a_direct_enqueue_returns_its_stored_job(echomq, jobs, enqueued_past_a_broken_receiver):
    """Raised, the error told the caller the enqueue failed though the job was stored."""
    result = tasks.add.enqueue(1, 2)
    assert (
        enqueued_past_a_broken_receiver == [result.id]
        and jobs.get("default", result.id).state == "pending"
    )


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_server_at_commit_still_raises(on_commit, settings):
    settings.ECHOMQ = {**settings.ECHOMQ, "URL": "redis://127.0.0.1:1/0"}
    conf.reset()
    with pytest.raises(ConnectionError), transaction.atomic():
        tasks.add.enqueue(1, 2)
