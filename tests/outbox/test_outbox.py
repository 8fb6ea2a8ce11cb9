"""ENQUEUE_ON_COMMIT = "outbox" in this process: real commits and rollbacks of the test
database (SQLite), the relay run step by step against the suite's real server."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from echomq_django import conf, metrics, outbox, outbox_checks
from echomq_django.compat import TaskResultDoesNotExist, TaskResultStatus, task_enqueued
from echomq_django.devserver import EmbeddedServer
from echomq_django.engine.errors import CorruptRow, ServerUnavailable
from echomq_django.models import OutboxJob
from echomq_django.relay import MAX_ATTEMPTS, Relay
from tests.django import settings as django_test_settings
from tests.django import tasks as django_tasks
from tests.outbox import tasks
from tests.support import servers

pytestmark = pytest.mark.django_db(transaction=True)  # real commits
ROOT = Path(__file__).resolve().parents[2]


def keys(client) -> list[bytes]:
    return sorted(client.scan_iter())


def test_rollback_leaves_nothing_anywhere_and_the_same_block_committed_gives_one_job(echomq, jobs):
    with pytest.raises(RuntimeError), transaction.atomic():
        Group.objects.create(name="order-1")
        tasks.add.enqueue(1, 2)
        raise RuntimeError("the view fails after the enqueue")
    assert not Group.objects.exists() and not OutboxJob.objects.exists()
    assert Relay(jobs).drain() == 0
    assert keys(echomq) == []  # not one key on the server

    with transaction.atomic():
        Group.objects.create(name="order-1")
        result = tasks.add.enqueue(1, 2)
        assert OutboxJob.objects.filter(pk=result.id).exists()  # in the transaction...
        assert keys(echomq) == []  # ...and nowhere else yet
    assert Relay(jobs).drain() == 1
    assert jobs.stats("default").counts["pending"] == 1
    assert not OutboxJob.objects.exists()


def test_a_savepoint_rolled_back_drops_its_job_only(echomq, jobs):
    with transaction.atomic():
        kept = tasks.add.enqueue(1, 1)
        with pytest.raises(RuntimeError), transaction.atomic():
            tasks.add.enqueue(2, 2)
            raise RuntimeError
    assert list(OutboxJob.objects.values_list("id", flat=True)) == [kept.id]


def test_the_relayed_job_is_the_prepared_one_id_options_and_all(echomq, jobs):
    run_after = timezone.now() + timedelta(hours=2)
    with transaction.atomic():
        result = tasks.add.using(run_after=run_after).enqueue(20, 22)
    assert result.status == TaskResultStatus.READY and result.enqueued_at is None
    assert Relay(jobs).drain() == 1
    row = jobs.get("default", result.id)
    assert row is not None and row.state == "scheduled"
    assert (row.task, row.priority, row.max_attempts, row.lease_ms, row.result_ttl_ms) == (
        "tests.outbox.tasks.add", 7, 4, 12_000, 3_600_000
    )  # fmt: skip
    assert row.due_ms == int(run_after.timestamp() * 1000)
    assert row.run_after == run_after.isoformat()
    again = tasks.add.get_result(result.id)
    assert (again.args, again.task.run_after, again.enqueued_at is not None) == (
        [20, 22], run_after, True
    )  # fmt: skip


def test_get_result_answers_ready_while_the_job_waits_in_the_outbox(echomq, jobs):
    with transaction.atomic():
        result = tasks.add.enqueue(3, 4)
    waiting = tasks.add.get_result(result.id)
    assert waiting.status == TaskResultStatus.READY
    assert (waiting.id, waiting.args, waiting.task, waiting.enqueued_at) == (
        result.id, [3, 4], tasks.add, None
    )  # fmt: skip
    Relay(jobs).drain()
    assert tasks.add.get_result(result.id).enqueued_at is not None  # now the server's row
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result("01900000-0000-7000-8000-000000000000")


def test_outside_a_transaction_the_job_is_sent_at_once(echomq, jobs):
    result = tasks.add.enqueue(5, 6)
    assert not OutboxJob.objects.exists()
    assert jobs.get("default", result.id).state == "pending"


def test_task_enqueued_fires_at_the_commit(echomq):
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append(task_result.id)

    task_enqueued.connect(receiver)
    try:
        with transaction.atomic():
            result = tasks.add.enqueue(1, 1)
            assert seen == []
        assert seen == [result.id]
    finally:
        task_enqueued.disconnect(receiver)


def test_a_raising_task_enqueued_receiver_stops_no_other_commit_callback(
    echomq, enqueued_past_a_broken_receiver
):
    """Raised from the outbox's on-commit callback, it stopped Django's later callbacks."""
    later = []
    with transaction.atomic():
        first, second = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
        transaction.on_commit(lambda: later.append("ran"))
    assert enqueued_past_a_broken_receiver == [first.id, second.id] and later == ["ran"]


@pytest.mark.parametrize(
    ("args", "error"), [(("x" * 200, 1), "over the limit"), (("\udcff", 1), "lone surrogate")]
)
def test_a_bad_job_fails_the_enqueue_and_writes_nothing(echomq, settings, args, error):
    settings.ECHOMQ = {**settings.ECHOMQ, "MAX_PAYLOAD": 150}
    conf.reset()
    with transaction.atomic():
        with pytest.raises(ValueError, match=error):
            tasks.add.enqueue(*args)
        assert not OutboxJob.objects.exists()


def test_server_down_at_commit_then_back_the_job_arrives_exactly_once(settings):
    """The commit succeeds with the server stopped; the relay rides the outage out."""
    server = EmbeddedServer(binary=servers.valkey_binary()).start()
    try:
        settings.ECHOMQ = {"URL": server.url}
        settings.TASKS = {"default": {**django_test_settings.TASKS["default"]}}
        settings.TASKS["default"]["OPTIONS"] = {
            "ENQUEUE_ON_COMMIT": "outbox",
            "TASK_MODULES": ["tests.outbox.tasks"],
        }
        conf.reset()
        server.stop(cleanup=False)
        with transaction.atomic():  # before the outbox: ServerUnavailable from this exit
            Group.objects.create(name="order-down")
            result = tasks.add.enqueue(1, 2)
        assert Group.objects.filter(name="order-down").exists()
        relay = Relay(conf.get_jobs())
        with pytest.raises(ServerUnavailable):
            relay.step()
        assert list(OutboxJob.objects.values_list("id", flat=True)) == [result.id]  # kept

        server.start()
        assert relay.drain() == 1
        assert relay.drain() == 0
        stats = conf.get_jobs().stats("default")
        assert (stats.counts["pending"], stats.metrics["enqueued"]) == (1, 1)
        assert conf.get_jobs().get("default", result.id) is not None
        assert not OutboxJob.objects.exists()
    finally:
        conf.reset()
        server.stop()


def test_a_resent_job_is_refused_as_existing_and_its_row_deleted(echomq, jobs):
    """What a relay that died between its send and its delete leaves behind."""
    with transaction.atomic():
        results = tasks.add.get_backend().enqueue_many(tasks.add, [((i, i), {}) for i in range(5)])
    crashed = Relay(jobs)
    crashed.after_send = lambda ids: (_ for _ in ()).throw(SystemExit("killed"))
    with pytest.raises(SystemExit):
        crashed.step()
    assert OutboxJob.objects.count() == 5 and jobs.stats("default").counts["pending"] == 5
    OutboxJob.objects.update(available_at=timezone.now())  # as when the lease runs out
    relay = Relay(jobs)
    assert relay.drain() == 5
    assert (relay.relayed, relay.resent) == (5, 5)
    stats = jobs.stats("default")
    assert (stats.counts["pending"], stats.metrics["enqueued"]) == (5, 5)
    assert {r.id for r in results} == {e.id for e in jobs.page("default", "pending").entries}


def test_a_row_the_server_refuses_is_kept_with_its_error_and_the_others_go(echomq, jobs):
    with transaction.atomic():
        good = tasks.add.enqueue(1, 1)
        bad = tasks.add.enqueue(2, 2)
    options = json.loads(OutboxJob.objects.get(pk=bad.id).options)
    OutboxJob.objects.filter(pk=bad.id).update(options=json.dumps({**options, "priority": 10**6}))
    relay = Relay(jobs)
    assert relay.step() == 2
    assert jobs.get("default", good.id) is not None and jobs.get("default", bad.id) is None
    row = OutboxJob.objects.get()
    assert (row.id, row.attempts) == (bad.id, 1)
    assert "priority" in row.last_error and row.available_at > timezone.now()
    assert relay.drain() == 0  # held back, not retried in a tight loop
    assert outbox.backlog().refused == 1


@pytest.mark.parametrize("options", ["not json {", "[1, 2]", '{"colour": "red"}'])
def test_get_result_of_a_planted_bad_row_is_a_corrupt_row(echomq, options):
    """Not a raw JSONDecodeError or TypeError: typed, as a server row that cannot be one."""
    with transaction.atomic():
        result = tasks.add.enqueue(1, 1)
    OutboxJob.objects.filter(pk=result.id).update(options=options)
    with pytest.raises(CorruptRow, match="outbox row"):
        tasks.add.get_result(result.id)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"options": "not json {"}, "cannot be a job"),
        ({"options": "[1, 2]"}, "not a JSON object"),
        ({"options": '{"colour": "red"}'}, "colour"),
        ({"payload": "x" * 600_000}, "over the limit"),
        ({"queue": "no spaces allowed"}, "cannot be a job"),
        ({"options": "[" * 100_000 + "]" * 100_000}, "nested too deeply"),
        ({"options": '{"priority": ' + "[" * 100_000 + "]" * 100_000 + "}"}, "nested too deeply"),
    ],
    ids=[
        "not-json",
        "not-an-object",
        "unknown-field",
        "huge-payload",
        "bad-queue",
        "deep-options",
        "deep-option-value",
    ],
)
def test_a_planted_bad_row_is_kept_refused_and_blocks_nothing(echomq, jobs, change, error):
    """A row is data anyone with write access to the database can plant."""
    with transaction.atomic():
        good = tasks.add.enqueue(1, 1)
        bad = tasks.add.enqueue(2, 2)
    OutboxJob.objects.filter(pk=bad.id).update(**change)
    assert Relay(jobs).step() == 2
    assert jobs.get("default", good.id) is not None and jobs.get("default", bad.id) is None
    row = OutboxJob.objects.get()
    assert (row.id, row.attempts) == (bad.id, 1) and error in row.last_error
    assert jobs.stats("default").counts["pending"] == 1


@pytest.mark.parametrize(
    ("change", "attempts"),
    [
        ({"attempts": 1023}, 1024),  # 2.0**1024 overflowed: every batch failed, for good
        ({"attempts": MAX_ATTEMPTS}, MAX_ATTEMPTS),  # the column's most: + 1 overflowed it
        ({"attempts": 10**12}, MAX_ATTEMPTS),  # planted past it (SQLite holds 64 bits)
        ({"options": '{"\\ud800\\u0000": 1}'}, 1),  # an error text no database stores
    ],
    ids=["refused-1023-times", "attempts-at-most", "attempts-planted-huge", "unstorable-error"],
)
def test_a_row_refused_for_ever_is_held_back_and_the_rows_behind_it_still_go(
    echomq, jobs, change, attempts
):
    """The relay's bookkeeping of a refused row cannot fail: a failure undid the batch,
    and the row, still the oldest due, was taken first by every batch after it."""
    with transaction.atomic():
        bad = tasks.add.enqueue(0, 0)
    planted = {"options": "not json", "available_at": timezone.now() - timedelta(seconds=1)}
    OutboxJob.objects.filter(pk=bad.id).update(**{**planted, **change})
    with transaction.atomic():
        good = [tasks.add.enqueue(i, i) for i in range(5)]
    relay = Relay(jobs, batch=2)
    assert relay.drain() == 6
    assert all(jobs.get("default", result.id) is not None for result in good)
    row = OutboxJob.objects.get()
    assert (row.id, row.attempts) == (bad.id, attempts)
    assert row.available_at > timezone.now()  # held back, at most MAX_BACKOFF_S
    assert "cannot be a job" in row.last_error and "\x00" not in row.last_error


def test_idempotency_key_held_on_the_server_stores_nothing_new(echomq, jobs):
    first = tasks.add.using(idempotency_key="order-9").enqueue(1, 1)  # sent at once
    with transaction.atomic():
        second = tasks.add.using(idempotency_key="order-9").enqueue(1, 1)
    assert Relay(jobs).drain() == 1
    assert jobs.stats("default").counts["pending"] == 1 and jobs.get("default", first.id)
    with pytest.raises(TaskResultDoesNotExist):  # documented: the earlier job stands
        tasks.add.get_result(second.id)


def test_a_task_can_choose_the_outbox_on_a_backend_that_does_not(echomq, jobs, settings):
    settings.TASKS = {
        "default": {
            **django_test_settings.TASKS["default"],
            "OPTIONS": {"TASK_MODULES": ["tests.outbox.tasks"]},
        }
    }
    assert outbox.enabled()
    with transaction.atomic():
        mine = tasks.own_choice.enqueue(1)
        plain = django_tasks.add.enqueue(1, 1)
    assert list(OutboxJob.objects.values_list("id", flat=True)) == [mine.id]
    assert jobs.get("default", plain.id) is not None
    assert tasks.own_choice.get_result(mine.id).status == TaskResultStatus.READY


def test_without_an_outbox_task_nothing_reads_the_database(settings, url, redis_client):
    settings.ECHOMQ = {"URL": url}
    settings.TASKS = {"default": {**django_test_settings.TASKS["default"]}}
    conf.reset()
    assert not outbox.enabled()
    with pytest.raises(TaskResultDoesNotExist):
        django_tasks.add.get_result("01900000-0000-7000-8000-000000000000")
    assert "echomq_outbox" not in metrics.exposition(conf.get_jobs())
    conf.reset()


def test_the_backlog_is_shown_by_the_admin_metrics_and_stats(echomq, jobs, admin_client):
    with transaction.atomic():
        for i in range(3):
            tasks.add.enqueue(i, i)
    OutboxJob.objects.update(created_at=timezone.now() - timedelta(seconds=90))

    backlog = outbox.backlog()
    assert (backlog.jobs, backlog.refused) == (3, 0) and 90 <= backlog.oldest_age_s < 120
    page = admin_client.get("/admin/echomq/")
    assert page.status_code == 200 and page.context["outbox"].jobs == 3
    assert "3 jobs committed, waiting for the relay" in " ".join(page.content.decode().split())
    text = metrics.exposition(jobs)
    assert "echomq_outbox_jobs 3\n" in text
    age = next(line for line in text.splitlines() if line.startswith("echomq_outbox_oldest"))
    assert 90 <= float(age.split()[1]) < 120
    out = io.StringIO()
    call_command("echomq", "stats", stdout=out)
    assert "outbox: 3 job(s) waiting for the relay, the oldest for" in out.getvalue()


def test_the_system_check_wants_the_table_when_the_mode_is_on(echomq):
    assert outbox_checks.check_outbox_table() == []
    with connection.schema_editor() as editor:
        editor.delete_model(OutboxJob)
    try:
        (warning,) = outbox_checks.check_outbox_table()
        assert warning.id == "echomq.W020" and "migrate" in warning.hint
    finally:
        with connection.schema_editor() as editor:
            editor.create_model(OutboxJob)


def test_the_relay_query_uses_the_index(echomq):
    """At millions of rows the relay's query must be an index range scan, not a sort."""
    relay = Relay(conf.get_jobs())
    sql, params = relay.due_rows()[:500].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "echomq_outbox_available" in plan and "TEMP B-TREE" not in plan, plan


def test_the_backend_imports_without_the_app_registry():
    """The engine's own processes import backends.py (through echomq_django.management)
    with no settings at all: the outbox model must not be imported with it."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    proc = subprocess.run(
        [sys.executable, "-c", "import echomq_django.backends, echomq_django.management"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_a_bug_in_a_batch_is_logged_and_the_relay_thread_goes_on(echomq, jobs, caplog):
    """One bad batch must not end the relay thread while runreaper looks healthy."""
    relay = Relay(jobs, interval_s=0.02)
    real_step, calls = relay.step, []

    def step_with_a_bug() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in one batch")
        return real_step()

    relay.step = step_with_a_bug  # type: ignore[method-assign]
    with transaction.atomic():
        result = tasks.add.enqueue(1, 2)
    thread = relay.start()
    try:
        deadline = time.monotonic() + 30
        while jobs.get("default", result.id) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert thread.is_alive() and jobs.get("default", result.id) is not None
    finally:
        relay.stop()
        thread.join(10)
    assert "a batch failed" in caplog.text and "a bug in one batch" in caplog.text
