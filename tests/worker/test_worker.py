"""The engine worker in-process, on real servers: outcomes, leases, idling, shutdown."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any

import pytest
import redis

from echomq_django.devserver import EmbeddedServer, free_port
from echomq_django.engine import registry
from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.retry_policy import RetryPolicy
from echomq_django.engine.worker import Failure, Success, Worker, error_json
from echomq_django.engine.worker.completions import Completions
from echomq_django.engine.worker.waiting import IdleWait
from tests.support import servers
from tests.support.proxy import FaultProxy
from tests.support.running import RunningWorker
from tests.support.waiting import wait_until

NO_BACKOFF = RetryPolicy(base_ms=0)


def enqueue(jobs, queue="q", n=1, **fields):
    return [
        jobs.enqueue(queue, NewJob(payload=json.dumps(i), task="t", **fields)).id for i in range(n)
    ]


def test_completes_jobs_with_their_results(jobs, start_worker):
    ids = enqueue(jobs, n=3)
    stats = start_worker(lambda c: Success(f"done {c.job.payload}"), burst=True).stats()
    assert (stats.claimed, stats.completed, stats.retried, stats.dead) == (3, 3, 0, 0)
    for i, job_id in enumerate(ids):
        job = jobs.get("q", job_id)
        assert (job.state, job.result, job.attempts) == ("completed", f"done {i}", 1)


def test_failures_keep_class_path_and_traceback_and_die_past_max_attempts(jobs, start_worker):
    (job_id,) = enqueue(jobs, max_attempts=2)

    def boom(claimed):
        raise ValueError(f"boom {claimed.token}")

    stats = start_worker(boom, burst=True, retry_policy=NO_BACKOFF).stats()
    assert (stats.retried, stats.dead, stats.completed) == (1, 1, 0)
    job = jobs.get("q", job_id)
    assert job.state == "dead" and job.attempts == 2
    assert job.last_error == "ValueError: boom 2"
    errors = job.error_list
    assert [e["exception_class_path"] for e in errors] == ["builtins.ValueError"] * 2
    assert "raise ValueError" in errors[0]["traceback"] and "boom 1" in errors[0]["traceback"]


def test_backoff_schedules_the_retry_and_burst_exits_with_only_future_jobs(jobs, start_worker):
    (job_id,) = enqueue(jobs, max_attempts=5)
    policy = RetryPolicy(base_ms=60_000, jitter=0)
    t0 = time.time() * 1000
    stats = start_worker(lambda c: 1 / 0, burst=True, retry_policy=policy).stats(timeout=5)
    assert stats.retried == 1
    job = jobs.get("q", job_id)
    assert job.state == "scheduled"
    assert t0 + 59_000 < job.due_ms < t0 + 62_000


def test_a_failure_may_choose_its_backoff_or_refuse_retries(jobs, start_worker):
    first, second = enqueue(jobs, n=2, max_attempts=5)

    def handler(claimed):
        if claimed.id == first:
            return Failure(error_json("app.Slow", "later"), "Slow: later", backoff_ms=30_000)
        return Failure(error_json("app.Unknown", "no such task"), "Unknown", retry=False)

    stats = start_worker(handler, burst=True).stats()
    assert (stats.retried, stats.dead) == (1, 1)
    assert jobs.get("q", first).state == "scheduled"
    refused = jobs.get("q", second)
    assert refused.state == "dead" and refused.attempts == 1
    assert refused.error_list[0]["exception_class_path"] == "app.Unknown"


@pytest.mark.parametrize(
    "bug",
    [
        pytest.param(lambda: (_ for _ in ()).throw(SystemExit(3)), id="sys-exit"),
        pytest.param(lambda: (_ for _ in ()).throw(KeyboardInterrupt()), id="keyboard-interrupt"),
        pytest.param(lambda: None, id="returns-none"),
        pytest.param(lambda: Success(result=42), id="non-string-result"),
        pytest.param(lambda: Failure(error="not json", summary="Bad: x"), id="non-json-error"),
    ],
)
def test_handler_bugs_are_failures_never_a_dead_worker(jobs, start_worker, bug):
    broken, fine = enqueue(jobs, n=2, max_attempts=1)
    stats = start_worker(lambda c: bug() if c.id == broken else Success("ok"), burst=True).stats()
    assert (stats.dead, stats.completed) == (1, 1)
    job = jobs.get("q", broken)
    assert job.state == "dead" and job.error_list[0]["exception_class_path"]
    assert jobs.get("q", fine).state == "completed"


def test_a_corrupt_row_goes_to_dead_without_running(jobs, redis_client, start_worker):
    (job_id,) = enqueue(jobs)
    redis_client.hset(QueueKeys.of("q").job(job_id), "lease_ms", "not-a-number")
    called = []
    stats = start_worker(lambda c: called.append(c) or Success(), burst=True).stats()
    assert called == [] and stats.dead == 1
    row = redis_client.hgetall(QueueKeys.of("q").job(job_id))  # Job.from_row would refuse it
    assert row[b"state"] == b"dead" and b"CorruptRow" in row[b"last_error"]


def test_the_first_queue_has_precedence(jobs, start_worker):
    low = enqueue(jobs, "low", n=4)
    high = enqueue(jobs, "high", n=4)
    order = []
    start_worker(lambda c: order.append(c.id) or Success(), ["high", "low"], burst=True).stats()
    assert order == high + low


def test_max_jobs_stops_after_n(jobs, start_worker):
    enqueue(jobs, n=5)
    stats = start_worker(lambda c: Success(), max_jobs=3).stats()
    assert (stats.claimed, stats.completed, stats.released) == (3, 3, 0)
    assert jobs.stats("q").counts["pending"] == 2


def test_an_idle_worker_blocks_on_the_server_and_wakes_on_enqueue(jobs, start_worker, redis_client):
    started = {}
    rw = start_worker(
        lambda c: started.setdefault(c.id, time.perf_counter()) and Success(),
        idle_block_s=30,
        registry_interval_s=60,  # its first entry is written at start; no other in the window
    )
    wait_until(lambda: rw.worker.idle)
    calls_before = _total_calls(redis_client)
    time.sleep(1.0)
    idle_calls = _total_calls(redis_client) - calls_before
    t0 = time.perf_counter()
    (job_id,) = enqueue(jobs)
    wait_until(lambda: job_id in started, timeout=2)
    assert started[job_id] - t0 < 0.5  # woken by the enqueue, not by a poll interval
    assert idle_calls <= 1  # no polling loop (one stray command at most)


# Not the test's own INFO, nor a connection's handshake (a thread's first connection
# may open in the window: once, not a poll).
_NOT_POLLS = {"cmdstat_info", "cmdstat_hello", "cmdstat_client|setinfo", "cmdstat_auth"}


def _total_calls(client) -> int:
    stats = client.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k not in _NOT_POLLS)


def test_a_scheduled_job_starts_on_time_without_a_reaper(jobs, start_worker):
    started = {}
    rw = start_worker(
        lambda c: started.setdefault(c.id, time.time() * 1000) and Success(), idle_block_s=30
    )
    wait_until(lambda: rw.worker.idle)
    due = int(time.time() * 1000) + 300
    (job_id,) = enqueue(jobs, due_ms=due)
    wait_until(lambda: job_id in started, timeout=3)
    assert -5 <= started[job_id] - due < 250  # typically a few ms; loose for a busy CI


def _busy(seconds: float) -> None:
    """Burn CPU in pure Python (holding the GIL between switches), as a busy task does."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))


@pytest.mark.parametrize("wait", [time.sleep, _busy], ids=["sleeping", "cpu-bound"])
def test_a_job_three_leases_long_is_renewed_and_completes_once(jobs, start_worker, wait):
    (job_id,) = enqueue(jobs)
    seen = []

    def slow(claimed):
        seen.append(claimed.token)
        wait(0.9)
        return Success("slow")

    first = start_worker(slow, lease_ms=300)
    second = start_worker(slow, lease_ms=300)
    wait_until(lambda: jobs.get("q", job_id).state == "completed", timeout=5)
    assert jobs.reap("q").moved == 0
    first.worker.stop(), second.worker.stop()
    assert seen == [1]
    job = jobs.get("q", job_id)
    assert job.attempts == 1 and job.result == "slow" and job.error_list == []
    assert first.stats().lost + second.stats().lost == 0


def test_a_job_leased_shorter_than_the_others_held_is_renewed_in_time(jobs, start_worker):
    """The heartbeat sleeps until the earliest renewal among the leases held: a job
    with its own short lease, claimed beside long ones, must bring that time forward."""
    (long_id,) = enqueue(jobs)  # the worker's lease: a minute
    (short_id,) = enqueue(jobs, lease_ms=300)
    both_running = threading.Barrier(3)

    def slow(claimed):
        both_running.wait(5)
        time.sleep(1.0)
        return Success("done")

    start_worker(slow, lease_ms=60_000, concurrency=2)
    both_running.wait(5)
    time.sleep(0.7)  # more than two of the short leases
    assert jobs.reap("q").moved == 0, "the short lease expired while its job ran"
    wait_until(lambda: all(jobs.get("q", j).state == "completed" for j in (long_id, short_id)))
    assert jobs.get("q", short_id).attempts == 1


@pytest.mark.parametrize(("notice", "lease_ms"), [("on-complete", 5000), ("on-extend", 300)])
def test_a_lost_lease_is_never_completed_over_its_new_holder(jobs, start_worker, notice, lease_ms):
    """The handler loses its own lease (released, then re-claimed by another thread).

    With a long lease the loss shows when the fence refuses the complete; with a
    short one, the heartbeat's extend is refused first and the outcome discarded.
    """
    (job_id,) = enqueue(jobs)
    calls = []

    def handler(claimed):
        calls.append(claimed.token)
        if claimed.token == 1:
            jobs.release("q", claimed.id, claimed.token)  # as if reaped after a stall
            wait_until(lambda: len(calls) == 2 and jobs.get("q", job_id).state == "completed")
            if notice == "on-extend":
                time.sleep(0.3)  # several heartbeats: the extend is refused first
            return Success("zombie")
        return Success("holder")

    stats = start_worker(handler, lease_ms=lease_ms, concurrency=2, burst=True).stats()
    job = jobs.get("q", job_id)
    assert (job.state, job.result, job.attempts) == ("completed", "holder", 2)
    assert stats.completed == 1
    if notice == "on-extend":
        assert (stats.lost, stats.stale) == (1, 0)
    else:  # a running job's lease is renewed every second: either may see the loss first
        assert stats.lost + stats.stale == 1


def test_stop_lets_a_running_job_finish_within_grace(jobs, start_worker):
    (job_id,) = enqueue(jobs)
    running = threading.Event()

    def handler(claimed):
        running.set()
        time.sleep(0.4)
        return Success("finished")

    rw = start_worker(handler, grace_s=5)
    running.wait(5)
    t0 = time.monotonic()
    rw.worker.stop()
    stats = rw.stats()
    assert time.monotonic() - t0 < 2
    assert stats.completed == 1 and jobs.get("q", job_id).state == "completed"


def test_stop_leaves_what_outlives_grace_to_the_reaper_without_counting_an_attempt(
    jobs, start_worker
):
    """A thread cannot be killed: releasing its job at the end of the grace time would let
    another worker start it while it still runs here. It is left active; the reaper
    returns it (free) once the lease is out."""
    (job_id,) = enqueue(jobs)
    running, let_go = threading.Event(), threading.Event()

    def handler(claimed):
        running.set()
        let_go.wait(10)
        return Success("too late")

    rw = start_worker(handler, grace_s=0.2)
    running.wait(5)
    t0 = time.monotonic()
    rw.worker.stop()
    stats = rw.stats()
    let_go.set()
    assert time.monotonic() - t0 < 1.5
    assert (stats.released, stats.completed) == (0, 0)
    assert jobs.get("q", job_id).state == "active"
    wait_until(lambda: jobs.reap("q").moved == 1, timeout=5)
    job = jobs.get("q", job_id)
    assert (job.state, job.attempts, job.refunds) == ("pending", 1, 1)
    assert (job.solo, job.crashes) == (False, 0)  # a stop, not a crash of its worker


def test_a_solo_job_outliving_the_grace_again_and_again_is_never_charged(jobs, start_worker):
    """A solo job run in the worker's own thread (its handler cannot go to a child) and
    cut by stop after stop: each time left, then returned free; never a crash."""
    (job_id,) = enqueue(jobs)
    jobs.connector.client.hset(QueueKeys.of("q").job(job_id), "solo", "1")
    for stop in range(4):
        running, let_go = threading.Event(), threading.Event()

        def handler(claimed, running=running, let_go=let_go):
            running.set()
            let_go.wait(10)
            return Success("too late")

        rw = start_worker(handler, grace_s=0.2, lease_ms=300)
        assert running.wait(5)
        rw.worker.stop()
        rw.stats()
        let_go.set()
        wait_until(lambda: jobs.reap("q").moved == 1, timeout=5)
        job = jobs.get("q", job_id)
        assert (job.state, job.crashes, job.refunds, job.solo) == ("pending", 0, stop + 1, True)


def test_the_registry_shows_a_running_worker_and_forgets_it(jobs, start_worker):
    (job_id,) = enqueue(jobs)
    let_go = threading.Event()
    rw = start_worker(
        lambda c: let_go.wait(10) and Success(),
        ["q", "other"],
        registry_interval_s=0.05,
        concurrency=3,
        sizes={"other": 1},
        name="w-registry",
    )
    info = wait_until(lambda: [w for w in registry.list_workers(jobs.connector) if w.running])
    assert [(w.id, w.queues, w.concurrency, w.running) for w in info] == [
        ("w-registry", ["q", "other"], 3, [job_id])
    ]
    assert (info[0].sizes, info[0].processes, info[0].queue_labels()) == (
        {"other": 1},
        0,
        ["q", "other:1"],
    )
    assert info[0].started_at <= info[0].last_seen <= time.time()
    let_go.set()
    rw.worker.stop()
    rw.stats()
    assert registry.list_workers(jobs.connector) == []


def test_a_dead_workers_entry_expires_by_itself(jobs, redis_client):
    now = time.time()
    info = registry.WorkerInfo("gone:1", "host", 1, ["q"], 1, [], now, now)
    registry.heartbeat(jobs.connector, info, ttl_s=0.1)
    assert [w.id for w in registry.list_workers(jobs.connector)] == ["gone:1"]
    time.sleep(0.2)
    assert registry.list_workers(jobs.connector) == []
    assert redis_client.zcard("emq:workers") == 0  # the index entry was pruned


def test_the_worker_reconnects_after_its_connections_are_killed(jobs, start_worker, redis_client):
    ids = enqueue(jobs, n=60)
    killed = threading.Event()

    def handler(claimed):
        time.sleep(0.005)
        if claimed.id == ids[20] and not killed.is_set():
            killed.set()
            redis_client.client_kill_filter(_type="normal", skipme=True)
        return Success()

    start_worker(handler, concurrency=4, burst=True).stats(timeout=20)
    assert killed.is_set()
    # A claim whose reply died with the connection holds its jobs until the lease
    # ends: the reaper's business, as after a crash. Nothing is lost either way.
    wait_until(lambda: jobs.reap("q") and jobs.stats("q").counts["active"] == 0, timeout=5)
    start_worker(lambda c: Success(), burst=True).stats()
    assert jobs.stats("q").counts["completed"] == 60


def test_bad_options_are_refused_before_anything_runs(jobs):
    with pytest.raises(ValueError, match="concurrency"):
        Worker(jobs, ["q"], Success, concurrency=0)
    with pytest.raises(ValueError, match="lease_ms"):
        Worker(jobs, ["q"], Success, lease_ms=8 * 24 * 3600 * 1000)
    with pytest.raises(ValueError, match="queue"):
        Worker(jobs, ["bad name"], Success)
    with pytest.raises(ValueError, match="worker id"):
        Worker(jobs, ["q"], Success, name="has space")
    with pytest.raises(ValueError, match="at least one queue"):
        Worker(jobs, [], Success)


def test_short_results_are_not_held_back_by_a_slow_job_after_them(jobs, start_worker):
    """Completions of short jobs are batched, but never wait for a slow job to end."""
    fast = enqueue(jobs, n=20)
    slow = jobs.enqueue("q", NewJob(payload='"slow"', task="slow")).id
    slow_running, let_go = threading.Event(), threading.Event()

    def handler(claimed):
        if claimed.id == slow:
            slow_running.set()
            let_go.wait(10)
        return Success()

    rw = start_worker(handler)
    assert slow_running.wait(5)
    try:
        wait_until(lambda: all(jobs.get("q", i).state == "completed" for i in fast), timeout=1)
    finally:
        let_go.set()
    rw.worker.stop()
    assert rw.stats().completed == 21


def test_a_silent_connection_never_wedges_the_worker(jobs, server, start_worker):
    """A half-open connection (bytes stop, no FIN): the blocking read times out and the
    worker reconnects. Production settings should give the main connection a
    socket_timeout too (ECHOMQ OPTIONS), as this test does."""
    proxy = FaultProxy(server.host, server.port).start()
    try:
        via_proxy = Jobs(Connector.from_url(proxy.url, socket_timeout=1))
        started = threading.Event()
        rw = RunningWorker(
            Worker(via_proxy, ["q"], lambda c: started.set() or Success(), idle_block_s=0.3)
        )
        wait_until(lambda: rw.worker.idle)
        time.sleep(0.5)  # past one block: its connection is open, and is the one frozen
        wait_until(lambda: rw.worker.idle)
        proxy.freeze()
        enqueue(jobs)  # straight to the server
        assert started.wait(10), "the worker stayed stuck on a silent connection"
        rw.worker.stop()
        rw.stats()
    finally:
        proxy.close()


def test_short_jobs_held_behind_a_slow_one_are_given_back(jobs, start_worker, monkeypatch):
    """Read-ahead must not strand short jobs while one slow job occupies the only thread.
    They go back together, in one round trip (a read-ahead may hold 1,000 jobs)."""
    release_many, batches = jobs.release_many, []

    def counted(items, **kwargs):
        batches.append(len(items))
        return release_many(items, **kwargs)

    monkeypatch.setattr(jobs, "release_many", counted)
    enqueue(jobs, n=200)  # warm-up: the average duration becomes tiny, read-ahead large
    (slow,) = enqueue(jobs)
    behind = enqueue(jobs, n=30)
    release_slow = threading.Event()

    def handler(claimed):
        if claimed.id == slow:
            release_slow.wait(10)
        return Success("null")

    first = start_worker(handler, concurrency=1)
    wait_until(lambda: jobs.get("q", slow).state == "active" and slow in first.worker.running)
    second = start_worker(handler, concurrency=1, name="second")
    # The jobs behind the slow one finish on the second worker while the slow one runs.
    wait_until(lambda: all(jobs.get("q", j).state == "completed" for j in behind), timeout=5)
    assert jobs.get("q", slow).state == "active"
    assert first.worker.running == [slow]  # read-ahead is not reported as running
    release_slow.set()
    wait_until(lambda: jobs.get("q", slow).state == "completed")
    given_back = [jobs.get("q", j) for j in behind if jobs.get("q", j).refunds]
    assert given_back, "the first worker held none of them: the test proves nothing"
    assert all(j.attempts - j.refunds == 1 for j in given_back)  # the give-back is refunded
    assert max(batches) > 1, batches  # given back together, not one call each
    first.worker.stop()
    second.worker.stop()


def test_a_registry_entry_from_before_sizes_reads_without_them(jobs, redis_client):
    now = time.time()
    registry.heartbeat(jobs.connector, registry.WorkerInfo("old:1", "h", 1, ["q"], 1, [], now, now))
    redis_client.hdel("emq:worker:old:1", "sizes", "processes")
    (info,) = registry.list_workers(jobs.connector)
    assert (info.sizes, info.processes, info.queue_labels()) == ({}, 0, ["q"])


@pytest.mark.parametrize(
    ("field", "value"),
    [("sizes", '{"q": 0}'), ("sizes", '{"q": true}'), ("sizes", '{"q": "1"}'), ("sizes", "[1]"),
     ("sizes", "{"), ("processes", "-1"), ("processes", "two")],
)  # fmt: skip
def test_a_registry_entry_with_planted_sizes_or_processes_is_skipped(
    jobs, redis_client, field, value
):
    now = time.time()
    for worker_id in ("good:1", "bad:2"):
        registry.heartbeat(
            jobs.connector, registry.WorkerInfo(worker_id, "h", 1, ["q"], 1, [], now, now)
        )
    redis_client.hset("emq:worker:bad:2", field, value)
    assert [w.id for w in registry.list_workers(jobs.connector)] == ["good:1"]


def test_an_unreadable_registry_entry_does_not_hide_the_other_workers(jobs, redis_client):
    now = time.time()
    for worker_id in ("good:1", "bad:2"):
        info = registry.WorkerInfo(worker_id, "h", 1, ["q"], 1, [], now, now)
        registry.heartbeat(jobs.connector, info, ttl_s=30)
    redis_client.delete("emq:worker:bad:2")
    redis_client.set("emq:worker:bad:2", "planted")  # not a hash
    assert [w.id for w in registry.list_workers(jobs.connector)] == ["good:1"]


def test_completions_refused_by_a_demoted_primary_are_sent_again():
    """READONLY on a flush (a failover behind a fixed address): those completions did
    not run. They are sent again once the server takes writes, never forgotten (a
    forgotten one would leave its job active, to run a second time after its lease)."""
    own = EmbeddedServer(binary=servers.valkey_binary(), appendonly=False).start()
    admin = redis.Redis.from_url(own.url)
    try:
        jobs = Jobs(Connector.from_url(own.url))
        enqueue(jobs, n=20)
        ran: Counter[str] = Counter()
        demoted = threading.Event()

        def handler(claimed):
            ran[claimed.id] += 1
            if not demoted.is_set():
                demoted.set()
                admin.replicaof("127.0.0.1", free_port())  # a primary that never answers
                threading.Timer(0.5, admin.replicaof, ("NO", "ONE")).start()
            time.sleep(0.01)
            return Success()

        worker = Worker(jobs, ["q"], handler, lease_ms=60_000, burst=True, grace_s=5)
        stats = RunningWorker(worker).stats(timeout=20)
        assert demoted.is_set()
        assert jobs.stats("q").counts["completed"] == 20
        assert stats.completed == 20 and sorted(ran.values()) == [1] * 20
    finally:
        admin.close()
        own.stop()


def test_a_job_whose_completion_is_on_the_wire_is_neither_running_nor_slowing_read_ahead(
    jobs, start_worker, monkeypatch
):
    """A finished job stays held until its completion is acknowledged. It must not be
    reported as running, nor count as a job running for ever: read-ahead is sized by
    how long the running jobs take, and such a job used to shrink it to nothing."""
    (job_id,) = enqueue(jobs)
    on_the_wire, let_through = threading.Event(), threading.Event()
    send = Completions.send

    def held_up(completions, *, everything=False):  # not sent until let through
        on_the_wire.set()
        if let_through.is_set():
            send(completions, everything=everything)

    monkeypatch.setattr(Completions, "send", held_up)
    rw = start_worker(lambda c: Success("null"), concurrency=1)
    assert on_the_wire.wait(10)
    time.sleep(0.3)  # far longer than READ_AHEAD_BUDGET_MS
    assert rw.worker.running == []
    # Read-ahead still holds more than one job per thread: more jobs are claimed while
    # the first one's completion is held up (a shrunk target would claim one at most).
    enqueue(jobs, n=10)
    active = QueueKeys.of("q").active
    wait_until(lambda: jobs.connector.client.zcard(active) > 1 + rw.worker.concurrency)
    let_through.set()
    wait_until(lambda: jobs.get("q", job_id).state == "completed")


def test_a_stop_that_lands_as_the_idle_block_begins_still_ends_it(jobs, monkeypatch):
    """stop() (from a signal handler) can come after the fetcher checked for it and
    before its blocking read was sent: the read then reconnects and would block for
    the whole idle timeout (5 s), as seen when stopping workers after a run."""
    worker = Worker(jobs, ["q"], lambda c: Success("null"), idle_block_s=5.0, lease_ms=1000)
    blocking_client = IdleWait._blocking_client
    stops = []

    def stopped_just_before_the_send(idle: IdleWait) -> redis.Redis:
        """The blocking read's connection is taken right after the stop: it is sent on
        a fresh one (redis-py reconnects what the stop closed)."""
        client = blocking_client(idle)
        pool = client.connection_pool
        get_connection = type(pool).get_connection

        def stop_then_get() -> Any:
            if not stops:
                stops.append(worker.stop())
            return get_connection(pool)

        pool.get_connection = stop_then_get  # type: ignore[method-assign]
        return client

    monkeypatch.setattr(IdleWait, "_blocking_client", stopped_just_before_the_send)
    started = time.monotonic()
    try:
        RunningWorker(worker).stats(timeout=10)
    finally:
        worker.stop()  # a worker left running would take the next tests' jobs
    assert stops, "the idle wait no longer takes its connection there: move the stop"
    assert time.monotonic() - started < 2.0
