"""A fired job is the row ``task.enqueue()`` stores: every option of the task reaches it.

The rows are compared field for field, whatever the fields are, so an option that
one path stores and the other forgets fails here; an option a schedule cannot keep
is refused when it is declared, never dropped.
"""

from __future__ import annotations

from dataclasses import fields

import pytest

from echomq_django import conf, schedules
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.scheduler import Scheduler
from echomq_django.engine.schedules import JOB_TEMPLATE, PER_TICK, REFUSED
from echomq_django.schedule_checks import check_schedules
from tests.django import settings as django_settings

from .conftest import backdate
from .tasks import every_option

pytestmark = pytest.mark.django_db
TASKS = {"default": {**django_settings.TASKS["default"], "OPTIONS": {
    **django_settings.TASKS["default"]["OPTIONS"],
    "TASK_MODULES": ["tests.django.tasks", "tests.schedules.tasks"],
}}}  # fmt: skip
# What differs between two jobs of one task by nature: its id, when, its place in line.
PER_JOB = {b"id", b"enqueued_at", b"seq"}


@pytest.fixture
def declare(settings, url, redis_client):
    """declare(SCHEDULES) -> the Scheduler: the app aimed at the (flushed) server."""

    def point(entries):
        settings.ECHOMQ = {"URL": url, "SCHEDULES": entries}
        settings.TASKS = TASKS
        conf.reset()
        return Scheduler(conf.get_jobs())

    yield point
    conf.reset()


def test_every_new_job_field_is_stored_per_tick_or_refused():
    assert {f.name for f in fields(NewJob)} == {*JOB_TEMPLATE, *PER_TICK, *REFUSED}


@pytest.mark.parametrize("how", ["fired", "run now"])
def test_a_scheduled_job_is_the_row_enqueue_stores_for_its_task(declare, redis_client, how):
    path = "tests.schedules.tasks.every_option"
    scheduler = declare({"beat": {"task": path, "every": 1, "args": [7], "overlap": "allow"}})
    (schedule,) = schedules.declared()
    assert scheduler.sync([schedule]) == {"emails/beat": "created"}
    if how == "fired":
        now = scheduler.read("emails")[0]
        backdate(redis_client, "emails", "beat", now // 1000 * 1000)
        (scheduled_id,) = [i for f in scheduler.fire_due(["emails"]).fired for i in f.ids]
    else:
        scheduled_id = scheduler.run_now("emails", "beat")
    enqueued_id = every_option.enqueue(7).id
    keys = QueueKeys.of("emails")
    scheduled, enqueued = (redis_client.hgetall(keys.job(i)) for i in (scheduled_id, enqueued_id))
    assert enqueued[b"timeout_ms"] == b"1000" and b"limits" in enqueued  # the options are set
    for row in (scheduled, enqueued):
        for name in PER_JOB:
            row.pop(name)
    assert scheduled == enqueued


def test_a_timeout_change_is_an_edit(declare):
    path = "tests.schedules.tasks.every_option"
    declare({"beat": {"task": path, "every": 1, "args": [7]}})
    (schedule,) = schedules.declared()
    shorter = NewJob(**{f.name: getattr(schedule.job, f.name) for f in fields(NewJob)} | {
        "timeout_ms": 500})  # fmt: skip
    edited = type(schedule)(name="beat", queue="emails", job=shorter, every_ms=1000)
    assert edited.digest != schedule.digest
    assert edited.definition()["timeout_ms"] == "500"


@pytest.mark.parametrize("task", ["keyed", "throttled"])
def test_an_option_a_schedule_cannot_keep_is_a_check_error_not_dropped(declare, task):
    declare({"beat": {"task": f"tests.schedules.tasks.{task}", "every": 60}})
    (error,) = check_schedules()
    assert error.id == "echomq.E105" and "idempotency_key" in error.msg
