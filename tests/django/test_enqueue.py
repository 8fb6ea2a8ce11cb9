"""The backend's enqueue and get_result against a real server (no worker involved)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from django.test import override_settings

from echomq_django import conf
from echomq_django.backends import EchoMQBackend, EchoMQTask
from echomq_django.compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
)
from echomq_django.engine.errors import InvalidJobOptions
from echomq_django.exceptions import InvalidTaskArguments
from tests.django import tasks

pytestmark = pytest.mark.django_db


def keys_and_values(client) -> dict[bytes, object]:
    """Every key with its type: a write of any kind shows up here."""
    return {key: client.type(key) for key in client.scan_iter()}


def test_backend_is_configured_and_supports_everything(echomq):
    assert isinstance(task_backends["default"], EchoMQBackend)
    assert isinstance(tasks.add.get_backend(), EchoMQBackend)
    assert all(
        getattr(EchoMQBackend, flag)
        for flag in (
            "supports_defer",
            "supports_async_task",
            "supports_get_result",
            "supports_priority",
        )
    )
    assert isinstance(tasks.add, EchoMQTask)


def test_enqueue_is_one_stored_row_readable_at_once(echomq, jobs):
    result = tasks.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY
    row = jobs.get("default", result.id)
    assert row is not None and row.state == "pending" and row.task == "tests.django.tasks.add"
    assert result.enqueued_at == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
        microseconds=row.enqueued_at
    )
    again = tasks.add.get_result(result.id)
    assert again.status == TaskResultStatus.READY
    assert (again.args, again.kwargs, again.task) == ([2, 3], {}, tasks.add)
    assert (again.enqueued_at, again.started_at, again.finished_at) == (
        result.enqueued_at,
        None,
        None,
    )
    assert again.worker_ids == [] and again.errors == [] and again.attempts == 0
    with pytest.raises(ValueError, match="not finished"):
        _ = again.return_value


def test_arguments_are_normalised_like_django(echomq):
    result = tasks.echo.enqueue((1, 2), {3: "three"}, key=(b"bytes", None, 1.5))
    assert result.args == [[1, 2], {"3": "three"}]
    assert result.kwargs == {"key": ["bytes", None, 1.5]}
    stored = tasks.echo.get_result(result.id)
    assert (stored.args, stored.kwargs) == (result.args, result.kwargs)


def test_get_result_rebuilds_the_task_exactly(echomq):
    run_after = datetime(2099, 5, 6, 7, 8, 9, 123456, tzinfo=ZoneInfo("Europe/Paris"))
    task = tasks.echo.using(priority=-42, queue_name="slow", run_after=run_after)
    result = task.enqueue("x")
    stored = tasks.echo.get_result(result.id)
    assert stored.task == task
    assert stored.task.run_after == run_after and stored.task.run_after.utcoffset() == timedelta(
        hours=2
    )
    assert (stored.task.priority, stored.task.queue_name, stored.task.backend) == (
        -42,
        "slow",
        "default",
    )
    context_result = tasks.flaky.enqueue(1)
    assert tasks.flaky.get_result(context_result.id).task.takes_context is True


def test_without_use_tz_naive_times_are_in_time_zone_whatever_zone_is_active(
    echomq, jobs, settings
):
    """Django's naive ``timezone.now()`` is local time in TIME_ZONE, whatever zone a
    request activated: a naive run_after is read in it, and times come back in it."""
    from django.utils import timezone

    settings.USE_TZ, settings.TIME_ZONE = False, "Asia/Tokyo"
    with timezone.override("UTC"):
        now = timezone.now()
        due = tasks.add.using(run_after=now - timedelta(seconds=1)).enqueue(1, 1)
        later = tasks.add.using(run_after=now + timedelta(hours=1)).enqueue(1, 1)
    assert abs((due.enqueued_at - now).total_seconds()) < 60
    assert jobs.get("default", due.id).state == "pending"  # due a second ago, not in 9 h
    assert jobs.get("default", later.id).state == "scheduled"
    tokyo = now.replace(tzinfo=ZoneInfo("Asia/Tokyo"))
    assert jobs.get("default", later.id).due_ms == int(
        (tokyo + timedelta(hours=1)).timestamp() * 1000
    )


def test_a_naive_run_after_in_a_dst_fold_is_due_at_its_own_hour(echomq, jobs, settings):
    """The two 01:30 of a fall-back night compare equal (fold is ignored), and so do
    their Tasks: the memoised plan gave the second the first one's due time."""
    settings.USE_TZ, settings.TIME_ZONE = False, "America/New_York"
    first, second = (datetime(2030, 11, 3, 1, 30, fold=fold) for fold in (0, 1))
    ids = [tasks.add.using(run_after=when).enqueue(1, 1).id for when in (first, second)]
    due = [jobs.get("default", job_id).due_ms for job_id in ids]
    assert due[1] - due[0] == 3_600_000


def test_run_after_at_another_offset_keeps_its_own_text(echomq, jobs):
    """The same instant at two offsets: equal Tasks, but each enqueue stores its own."""
    india = datetime(2030, 1, 1, 10, 0, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    utc = india.astimezone(UTC)
    for when in (india, utc):
        result = tasks.add.using(run_after=when).enqueue(1, 1)
        assert jobs.get("default", result.id).run_after == when.isoformat()
        assert tasks.add.get_result(result.id).task.run_after.utcoffset() == when.utcoffset()


def test_deferred_task_is_scheduled_at_its_run_after(echomq, jobs):
    run_after = datetime(2099, 1, 1, tzinfo=UTC)
    result = tasks.add.using(run_after=run_after).enqueue(1, 1)
    row = jobs.get("default", result.id)
    assert row.state == "scheduled"
    assert row.due_ms == int(run_after.timestamp() * 1000)
    assert tasks.add.get_result(result.id).status == TaskResultStatus.READY


def test_an_argument_with_no_json_form_is_refused_as_django_refuses_it(echomq):
    """Django's normalize_json raises TypeError for a type with no JSON form and
    ValueError for bytes that are not UTF-8: code written for Django's own backends
    catches EchoMQ's refusal with either."""
    from echomq_django.execution import NonJSONReturnValue

    with pytest.raises(ValueError, match="positional argument 0"):
        tasks.echo.enqueue(b"\xff")
    with pytest.raises(TypeError, match="positional argument 0"):
        tasks.echo.enqueue({1, 2})
    assert issubclass(NonJSONReturnValue, TypeError) and issubclass(NonJSONReturnValue, ValueError)


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: tasks.echo.enqueue({1, 2}), InvalidTaskArguments, "positional argument 0"),
        (
            lambda: tasks.echo.enqueue(1, when=datetime.now()),
            InvalidTaskArguments,
            "keyword argument 'when'",
        ),
        (lambda: tasks.echo.enqueue(float("nan")), InvalidTaskArguments, "positional argument 0"),
        (
            lambda: tasks.echo.enqueue({(1, 2): "tuple key"}),
            InvalidTaskArguments,
            "positional argument 0",
        ),
        (lambda: tasks.echo.using(queue_name="nope").enqueue(), InvalidTask, "Queue 'nope'"),
        (lambda: tasks.echo.using(priority=101).enqueue(), InvalidTask, "priority"),
        (lambda: tasks.echo.using(run_after=datetime(2099, 1, 1)).enqueue(), InvalidTask, "aware"),
        (lambda: tasks.echo.using(idempotency_key="").enqueue(), InvalidTask, "idempotency_key"),
    ],
    ids=[
        "set",
        "datetime-kwarg",
        "nan",
        "tuple-key",
        "unknown-queue",
        "priority",
        "naive-run_after",
        "empty-idempotency-key",
    ],
)
def test_bad_enqueue_raises_a_clear_error_and_writes_nothing(echomq, make, error, message):
    tasks.add.enqueue(0, 0)  # the queue exists: the registry and metrics are written already
    before = keys_and_values(echomq)
    with pytest.raises(error, match=message):
        make()
    assert keys_and_values(echomq) == before


def test_bad_argument_error_is_also_a_type_error(echomq):
    with pytest.raises(TypeError, match="positional argument 1"):
        tasks.echo.enqueue(1, object())


def test_queue_name_must_be_a_valid_engine_queue(echomq, settings, redis_client):
    from django.core.exceptions import ImproperlyConfigured

    settings.TASKS = {
        "default": {"BACKEND": "echomq_django.backends.EchoMQBackend", "QUEUES": ["ok", "{bad}"]}
    }
    backend = task_backends["default"]
    [problem] = backend.check()
    assert problem.id == "echomq.E005" and "invalid queue name" in problem.msg
    with pytest.raises(ImproperlyConfigured, match="invalid queue name"):
        backend.enqueue(tasks.add.using(queue_name="ok"), (1, 2), {})
    assert redis_client.dbsize() == 0


def test_module_level_tasks_only(echomq):
    def local():
        return 1

    from echomq_django.compat import task

    with pytest.raises(InvalidTask, match="module level"):
        task(local)


def test_unknown_options_and_bad_values_are_check_errors_and_refuse_enqueue(settings):
    """A bad TASKS entry never crashes an import or `manage.py check`: check() reports it."""
    from django.core.exceptions import ImproperlyConfigured

    for options, check_id, message in [
        ({"ENQUEUE_ON_COMIT": True}, "echomq.E004", "unknown options: 'ENQUEUE_ON_COMIT'"),
        ({"MAX_ATTEMPTS": 0}, "echomq.E006", "max_attempts"),
        ({"LEASE": -1}, "echomq.E006", "lease"),
        ({"LEASE": float("inf")}, "echomq.E006", "lease"),  # was an OverflowError from __init__
        ({"RESULT_TTL": float("nan")}, "echomq.E006", "result_ttl"),
        ({"BACKOFF": 10**30}, "echomq.E006", "backoff"),  # past any server score
        ({"BACKOFF": "soon"}, "echomq.E006", "backoff"),
        ({"TIMEOUT": 0}, "echomq.E006", "timeout must be positive"),
        ({"TIMEOUT": 8 * 24 * 3600}, "echomq.E006", "timeout_ms"),  # over the engine's 7 days
    ]:
        settings.TASKS = {
            "default": {"BACKEND": "echomq_django.backends.EchoMQBackend", "OPTIONS": options}
        }
        backend = task_backends["default"]
        [problem] = backend.check()
        assert problem.id == check_id and message in problem.msg
        with pytest.raises(ImproperlyConfigured, match=message):
            backend.enqueue(tasks.add, (1, 2), {})


def test_per_task_options_reach_the_row(echomq, jobs):
    result = tasks.tuned.enqueue()
    row = jobs.get("default", result.id)
    assert (row.max_attempts, row.lease_ms, row.result_ttl_ms, row.timeout_ms) == (
        4, 700, 60_000, 1500
    )  # fmt: skip
    plain = jobs.get("default", tasks.add.enqueue(1, 2).id)
    assert plain.lease_ms == 5000  # the backend's LEASE
    assert (plain.max_attempts, plain.timeout_ms) == (1, 0)  # no retry, no time limit by default
    with pytest.raises(InvalidTask, match="max_attempts"):
        EchoMQTask(func=tasks.add.func, max_attempts=0)
    with pytest.raises(InvalidTask, match="lease"):
        EchoMQTask(func=tasks.add.func, lease="soon")
    with pytest.raises(InvalidTask, match="timeout"):
        EchoMQTask(func=tasks.add.func, timeout=-1)
    with pytest.raises(InvalidTask, match="retry_on must be exception classes"):
        EchoMQTask(func=tasks.add.func, retry_on=[ValueError, "KeyError"])


def test_get_result_of_missing_expired_or_ill_formed_ids(echomq):
    for result_id in ["", "nope", "0190a0e4-0000-7000-8000-000000000000", "../etc", 42]:
        with pytest.raises(TaskResultDoesNotExist):
            tasks.add.get_result(result_id)


def test_idempotency_key_stores_the_job_once_while_it_is_pending(echomq, jobs):
    keyed = tasks.add.using(idempotency_key="order-42")
    first = keyed.enqueue(1, 2)
    second = keyed.enqueue(1, 2)
    assert second.id == first.id
    assert jobs.stats("default").counts["pending"] == 1
    assert tasks.add.get_result(first.id).task == keyed
    other = tasks.add.using(idempotency_key="order-43").enqueue(1, 2)
    assert other.id != first.id


def test_an_idempotency_key_is_held_per_task(echomq, jobs):
    """Another task's job with the same key is not this task's result (Django: ``enqueue``
    returns a result of the task it was called on)."""
    first = tasks.add.using(idempotency_key="order-42").enqueue(1, 2)
    other = tasks.echo.using(idempotency_key="order-42").enqueue(3)
    assert other.id != first.id and other.task.func is tasks.echo.func
    assert tasks.echo.get_result(other.id).args == [3]
    assert tasks.echo.using(idempotency_key="order-42").enqueue(4).id == other.id
    assert jobs.stats("default").counts["pending"] == 2


def test_task_enqueued_fires_after_the_row_exists(echomq, jobs):
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((sender, task_result.status, jobs.get("default", task_result.id).state))

    task_enqueued.connect(receiver)
    try:
        tasks.add.enqueue(1, 2)
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [(EchoMQBackend, TaskResultStatus.READY, "pending")]


def test_payload_is_plain_json_with_what_get_result_needs(echomq, jobs):
    result = tasks.flaky.using(idempotency_key="k").enqueue(2)
    payload = json.loads(jobs.get("default", result.id).payload)
    assert payload == {
        "v": 1,
        "task": "tests.django.tasks.flaky",
        "args": [2],
        "kwargs": {},
        "backend": "default",
        "takes_context": True,
        "idempotency_key": "k",
    }


def test_payload_too_large_is_refused_before_anything_is_sent(echomq, settings):
    settings.ECHOMQ = {**settings.ECHOMQ, "MAX_PAYLOAD": 1000}
    conf.reset()
    tasks.add.enqueue(0, 0)
    before = keys_and_values(echomq)
    with pytest.raises(InvalidJobOptions, match="over the limit"):
        tasks.echo.enqueue("x" * 2000)
    assert keys_and_values(echomq) == before


def test_aenqueue_and_aget_result(echomq):
    @async_to_sync
    async def scenario():
        result = await tasks.add.aenqueue(4, 5)
        stored = await tasks.add.aget_result(result.id)
        await stored.arefresh()
        with pytest.raises(TaskResultDoesNotExist):
            await tasks.add.aget_result("0190a0e4-0000-7000-8000-000000000000")
        return result, stored

    result, stored = scenario()
    assert (stored.id, stored.args, stored.status) == (result.id, [4, 5], TaskResultStatus.READY)
    assert scenario()[0].id != result.id  # a second event loop: no client cached across loops


class TestEnqueueOnCommit:
    """With ENQUEUE_ON_COMMIT the job reaches the server only when the transaction commits."""

    @pytest.fixture
    def on_commit(self, echomq, settings):
        settings.TASKS = {
            "default": {
                **settings.TASKS["default"],
                "OPTIONS": {**settings.TASKS["default"]["OPTIONS"], "ENQUEUE_ON_COMMIT": True},
            }
        }
        return conf.get_jobs()

    @pytest.mark.django_db(transaction=True)
    def test_commit_sends_once_after_the_commit(self, on_commit):
        with transaction.atomic():
            result = tasks.add.enqueue(1, 2)
            assert result.id and result.enqueued_at is None
            assert on_commit.get("default", result.id) is None
        assert on_commit.get("default", result.id).state == "pending"
        assert result.enqueued_at is not None  # filled in when it was sent
        assert on_commit.stats("default").counts["pending"] == 1

    @pytest.mark.django_db(transaction=True)
    def test_a_job_that_cannot_be_stored_fails_the_call_not_the_commit(self, on_commit, settings):
        settings.ECHOMQ = {**settings.ECHOMQ, "MAX_PAYLOAD": 1000}
        conf.reset()
        with transaction.atomic():
            with pytest.raises(InvalidJobOptions, match="over the limit"):
                tasks.echo.enqueue("x" * 2000)
            kept = tasks.add.enqueue(1, 2)
        assert conf.get_jobs().stats("default").counts["pending"] == 1
        assert tasks.add.get_result(kept.id).status == TaskResultStatus.READY

    @pytest.mark.django_db(transaction=True)
    def test_rollback_never_sends(self, on_commit):
        with pytest.raises(RuntimeError), transaction.atomic():
            result = tasks.add.enqueue(1, 2)
            raise RuntimeError("rollback")
        with pytest.raises(TaskResultDoesNotExist):
            tasks.add.get_result(result.id)
        assert on_commit.stats("default").counts["pending"] == 0

    @pytest.mark.django_db(transaction=True)
    def test_nested_savepoints(self, on_commit):
        with transaction.atomic():
            kept = tasks.add.enqueue(1, 1)
            try:
                with transaction.atomic():
                    dropped = tasks.add.enqueue(2, 2)
                    raise RuntimeError("inner rollback")
            except RuntimeError:
                pass
            with transaction.atomic():
                inner_kept = tasks.add.enqueue(3, 3)
            assert on_commit.stats("default").counts["pending"] == 0
        assert on_commit.get("default", kept.id) is not None
        assert on_commit.get("default", inner_kept.id) is not None
        assert on_commit.get("default", dropped.id) is None

    @pytest.mark.django_db(transaction=True, databases=["default", "other"])
    def test_a_transaction_on_another_database_holds_the_job_too(self, on_commit):
        """A view whose transaction runs on another database: before, the job was sent
        at once (on_commit was bound to 'default', not in a transaction) and outlived
        the rollback."""
        with pytest.raises(RuntimeError), transaction.atomic(using="other"):
            dropped = tasks.add.enqueue(1, 2)
            assert on_commit.get("default", dropped.id) is None
            raise RuntimeError("rollback")
        assert on_commit.get("default", dropped.id) is None
        with transaction.atomic(using="other"):
            kept = tasks.add.enqueue(3, 4)
            assert on_commit.get("default", kept.id) is None
        assert on_commit.get("default", kept.id).state == "pending"

    @pytest.mark.django_db(transaction=True)
    def test_outside_a_transaction_it_is_sent_at_once(self, on_commit):
        result = tasks.add.enqueue(1, 2)
        assert on_commit.get("default", result.id).state == "pending"

    def test_inside_a_test_case_nothing_is_sent_without_a_commit(self, on_commit):
        with transaction.atomic():
            result = tasks.add.enqueue(1, 2)
        assert on_commit.get("default", result.id) is None  # the test's own atomic never commits

    def test_per_task_choice_overrides_the_backend(self, on_commit):
        with transaction.atomic():
            result = tasks.urgent.enqueue()
            assert on_commit.get("default", result.id).state == "pending"

    @pytest.mark.parametrize("choice", ["Outbox", "yes", 1, "true"])
    def test_a_tasks_own_choice_is_validated_as_the_backends_is(self, on_commit, choice):
        """Before, "Outbox" quietly became plain on-commit (which can lose a job)."""
        from dataclasses import replace

        with pytest.raises(InvalidTask, match="enqueue_on_commit must be"):
            replace(tasks.urgent, enqueue_on_commit=choice)

    @pytest.mark.django_db(transaction=True)
    def test_an_idempotency_key_held_at_commit_gives_the_earlier_job(self, on_commit):
        """The caller holds the result before the commit: it must not keep an id never stored."""
        keyed = tasks.add.using(idempotency_key="order-7")
        earlier = keyed.enqueue(1, 2)  # outside a transaction: stored at once
        with transaction.atomic():
            later = keyed.enqueue(1, 2)
        assert later.id == earlier.id
        assert later.enqueued_at == earlier.enqueued_at
        assert tasks.add.get_result(later.id).id == earlier.id
        assert on_commit.stats("default").counts["pending"] == 1

    def test_captured_on_commit_callbacks_send_in_test_cases(
        self, on_commit, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            result = tasks.add.enqueue(1, 2)
        assert on_commit.get("default", result.id).state == "pending"


@override_settings()
def test_without_on_commit_enqueue_is_immediate_inside_a_transaction(echomq, jobs):
    with transaction.atomic():
        result = tasks.add.enqueue(1, 2)
        assert jobs.get("default", result.id).state == "pending"


def test_backends_never_connect_until_used(settings):
    """@task builds backends at import time: an unreachable server must not matter then."""
    from echomq_django.compat import task
    from echomq_django.engine.errors import ServerUnavailable

    settings.ECHOMQ = {"URL": "redis://127.0.0.1:1/0", "OPTIONS": {"socket_connect_timeout": 0.2}}
    settings.TASKS = {"default": {"BACKEND": "echomq_django.backends.EchoMQBackend"}}
    built = task(tasks.add.func)  # a new backend object for the new TASKS, no connection
    assert isinstance(built.get_backend(), EchoMQBackend)
    with pytest.raises(ServerUnavailable):
        built.enqueue(1, 2)
    conf.reset()


def test_enqueue_is_exactly_one_script_call(echomq, monkeypatch):
    from redis.connection import AbstractConnection

    tasks.add.enqueue(0, 0)  # loads the script and registers the queue, once per process
    sent = []
    pack_command, pack_commands = AbstractConnection.pack_command, AbstractConnection.pack_commands

    def one(self, *args):
        sent.append(args[0])
        return pack_command(self, *args)

    def many(self, commands):
        sent.extend(command[0] for command in commands)
        return pack_commands(self, commands)

    # Everything any connection sends is packed by one of these two.
    monkeypatch.setattr(AbstractConnection, "pack_command", one)
    monkeypatch.setattr(AbstractConnection, "pack_commands", many)
    tasks.echo.using(priority=3).enqueue({"a": [1, 2]}, b=None)
    assert sent == ["EVALSHA"]


def test_an_expired_result_does_not_exist(echomq, jobs):
    from dataclasses import replace

    from echomq_django.engine.worker import Worker
    from echomq_django.execution import execute

    short = replace(tasks.add, result_ttl=0)
    result = short.enqueue(1, 2)
    Worker(jobs, ["default"], execute, burst=True, idle_block_s=0.2).run()
    assert short.get_result(result.id).return_value == 3
    jobs.trim("default", "completed")
    with pytest.raises(TaskResultDoesNotExist):
        short.get_result(result.id)


def test_enqueue_many_validates_all_then_sends_one_pipeline(echomq, jobs, redis_client):
    from echomq_django.compat import task_enqueued

    backend = tasks.add.get_backend()
    with pytest.raises(TypeError, match="set"):
        backend.enqueue_many(tasks.add, [((1, 2), {}), (({1},), {})])
    assert redis_client.dbsize() == 0  # the good one was not sent either
    seen = []

    def record(sender, task_result, **kwargs):
        seen.append(task_result.id)

    task_enqueued.connect(record)
    try:
        results = backend.enqueue_many(tasks.add, [((i, i), {}) for i in range(50)])
    finally:
        task_enqueued.disconnect(record)
    assert [r.id for r in results] == seen and len(set(seen)) == 50
    assert all(r.enqueued_at is not None for r in results)
    assert jobs.stats("default").counts["pending"] == 50
    assert tasks.add.get_result(results[7].id).args == [7, 7]


def test_job_options_are_parsed_once_per_task_and_the_memo_is_bounded(echomq):
    from datetime import UTC, datetime, timedelta

    from echomq_django.backends import OPTIONS_MEMO_SIZE

    backend = tasks.add.get_backend()
    first = backend.options_for(tasks.add)
    assert backend.options_for(tasks.add) is first
    base = datetime(2030, 1, 1, tzinfo=UTC)
    for i in range(OPTIONS_MEMO_SIZE + 10):  # a new Task per run_after
        backend.options_for(tasks.add.using(run_after=base + timedelta(seconds=i)))
    assert len(backend._options) <= OPTIONS_MEMO_SIZE


def test_get_result_reads_every_configured_queue_in_one_round_trip(echomq, monkeypatch):
    import redis.connection

    in_emails = tasks.fail.enqueue("x")  # queue "emails": not the first of QUEUES
    in_default = tasks.add.enqueue(1, 2)
    sends = []
    original = redis.connection.AbstractConnection.send_packed_command

    def counted(self, command, *args, **kwargs):
        sends.append(command)
        return original(self, command, *args, **kwargs)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    assert tasks.fail.get_result(in_emails.id).task.queue_name == "emails"
    assert len(sends) == 1
    assert tasks.add.get_result(in_default.id).id == in_default.id
    assert len(sends) == 2
    # A miss may look in the outbox (where its table exists), then at the server again.
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result("0190a0e4-0000-7000-8000-000000000000")
