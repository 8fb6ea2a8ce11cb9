"""Rows written under one USE_TZ, read and run under the other: a project switching
USE_TZ on (or a test overriding it) must not lose its deferred jobs. A naive run_after
was read in TIME_ZONE when its due time was set (``enqueue_plan.due_ms``); a Task under
USE_TZ=True cannot hold a naive one, so the row's is made aware there."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from echomq_django.engine.worker import Worker
from echomq_django.execution import execute
from tests.django import tasks

pytestmark = pytest.mark.django_db


def run_default(jobs) -> None:
    Worker(jobs, ("default",), execute, burst=True, name="w", idle_block_s=0.2).run()


@override_settings(TIME_ZONE="America/New_York")
def test_a_naive_run_after_reads_and_runs_once_use_tz_is_on(echomq, jobs):
    with override_settings(USE_TZ=False):
        naive = timezone.now() - timedelta(seconds=5)  # naive, in TIME_ZONE
        result = tasks.add.using(run_after=naive).enqueue(1, 2)
    read = tasks.add.get_result(result.id)
    assert read.task.run_after == timezone.make_aware(naive)
    assert read.status == "READY"
    run_default(jobs)
    done = tasks.add.get_result(result.id)
    assert (done.status, done.return_value, done.errors) == ("SUCCESSFUL", 3, [])


def test_an_aware_run_after_reads_as_written_under_either_setting(echomq, jobs):
    aware = datetime(2030, 1, 1, 9, 30, tzinfo=timezone.get_fixed_timezone(120))
    result = tasks.add.using(run_after=aware).enqueue(1, 2)
    for use_tz in (True, False):
        with override_settings(USE_TZ=use_tz):
            run_after = tasks.add.get_result(result.id).task.run_after
            assert (run_after, run_after.utcoffset()) == (aware, timedelta(hours=2))


def test_a_naive_run_after_stays_naive_while_use_tz_is_off(echomq, jobs):
    with override_settings(USE_TZ=False):
        naive = datetime(2030, 1, 1, 9, 30)
        result = tasks.add.using(run_after=naive).enqueue(1, 2)
        assert tasks.add.get_result(result.id).task.run_after == naive
