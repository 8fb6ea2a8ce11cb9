"""Bookkeeping never half-does a transition: corrupt counters and wake keys planted.

A Lua script that raises keeps the writes it made before (Redis rolls nothing back).
A transition either fails before its first write or completes; its bookkeeping (the
metrics counters, the per-minute throughput, a schedule's counters, the wake-up, a
gate's slots) comes after its real writes, so it is best-effort: a counter that is not
an integer, or a key of another type at a counter's or the wake key's name, loses the
count and nothing else. Each test plants one, runs a transition, and checks that it
completed fully, that the planted key is left as it was, and that a second run does
not do it again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from echomq_django.engine.errors import StaleToken
from echomq_django.engine.jobs import Jobs
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.scheduler import Scheduler
from echomq_django.engine.worker import Success, Worker
from tests.schedules.conftest import backdate, every, expected_id, whole_second

from .conftest import QUEUE, WORKER, assert_one_place, enqueue_n, error_json, new, row

K = QueueKeys.of(QUEUE)

# Every counter a transition bumps in the queue's metrics hash.
COUNTERS = (
    "enqueued", "claimed", "dangling", "completed", "retried", "dead", "cancelled", "crashed",
    "deleted", "reaped", "reaped_unstarted", "reaped_dead", "released", "revived",
    "revive_refused", "repaired", "trimmed", "purged",
)  # fmt: skip


def server_ms(client) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def throughput_keys(client) -> list[str]:
    """This minute's and the next one's throughput hash (a test may cross a minute)."""
    minute = server_ms(client) // 60000
    return [K.throughput(minute), K.throughput(minute + 1)]


def metrics_fields(client) -> list[str]:
    client.hset(K.metrics, mapping=dict.fromkeys(COUNTERS, "x"))
    return [K.metrics]


def string_at(key: str) -> Callable[[Any], list[str]]:
    def plant(client) -> list[str]:
        client.set(key, "planted")
        return [key]

    return plant


def throughput_strings(client) -> list[str]:
    keys = throughput_keys(client)
    for key in keys:
        client.set(key, "planted")
    return keys


PLANTS: dict[str, Callable[[Any], list[str]]] = {
    "metrics-fields": metrics_fields,
    "metrics-string": string_at(K.metrics),
    "wake-string": string_at(K.wake),
    "throughput-string": throughput_strings,
}


def snapshot(client, keys: list[str]) -> dict[str, Any]:
    read = {"string": client.get, "hash": client.hgetall, "none": lambda k: None}
    return {k: (client.type(k), read[client.type(k)](k)) for k in keys}


class Planted:
    """The corrupt keys of one plant: planted on ``__call__``, checked untouched by ``check``."""

    def __init__(self, client, how: Callable[[Any], list[str]]) -> None:
        self.client, self.how, self.keys, self.before = client, how, [], {}

    def __call__(self) -> None:
        self.keys = self.how(self.client)
        self.before = snapshot(self.client, self.keys)

    def check(self) -> None:
        assert snapshot(self.client, self.keys) == self.before  # left as planted


@pytest.fixture(params=list(PLANTS), ids=list(PLANTS))
def plant(request, jobs) -> Planted:
    return Planted(jobs.connector.client, PLANTS[request.param])


def one_claim(jobs: Jobs, count: int = 1, **options: Any):
    claim = jobs.claim(QUEUE, WORKER, count=count, **options)
    assert len(claim.jobs) == count
    return claim.jobs


# -- the reviewer's reproductions ---------------------------------------------------------


@pytest.mark.parametrize(
    "plant_one",
    [
        lambda c: c.hset(K.metrics, "enqueued", "x"),
        lambda c: c.set(K.metrics, "planted"),
        lambda c: c.set(K.wake, "planted"),
    ],
    ids=["enqueued-field", "metrics-string", "wake-string"],
)
def test_enqueue_over_a_corrupt_counter(jobs, plant_one):
    """Either it succeeds fully, or fails with nothing stored: best-effort counters, so
    it succeeds, and the caller's retry (same idempotency key) makes no duplicate."""
    plant_one(jobs.connector.client)
    first = jobs.enqueue(QUEUE, new(idempotency_key="k"))
    assert (first.state, first.created) == ("pending", True)
    again = jobs.enqueue(QUEUE, new(idempotency_key="k"))
    assert (again.id, again.created) == (first.id, False)
    many = jobs.enqueue_many(QUEUE, [new(), new(due_ms=server_ms(jobs.connector.client) + 60000)])
    assert [(e.state, e.created) for e in many] == [("pending", True), ("scheduled", True)]
    assert assert_one_place(jobs) == {
        first.id: "pending", many[0].id: "pending", many[1].id: "scheduled"
    }  # fmt: skip


def run_burst(jobs: Jobs, handler, timeout: float = 20.0):
    """A real Worker in burst mode, in a thread; stopped whatever happens."""
    worker = Worker(jobs, [QUEUE], handler, burst=True, lease_ms=1000, grace_s=5.0)
    stats: list[Any] = []
    thread = threading.Thread(target=lambda: stats.append(worker.run()), daemon=True)
    thread.start()
    try:
        thread.join(timeout)
        assert not thread.is_alive(), "the worker never ran out of work"
    finally:
        worker.stop()
        thread.join(10)
    return stats[0]


def test_claim_over_a_corrupt_claimed_counter(jobs):
    """Before: every claim leased its jobs then failed on HINCRBY claimed; no job ever ran."""
    jobs.connector.client.hset(K.metrics, "claimed", "x")
    ids = enqueue_n(jobs, 5)
    stats = run_burst(jobs, lambda c: Success("ok"))
    assert (stats.claimed, stats.completed) == (5, 5)
    for job_id in ids:
        r = row(jobs, job_id)
        assert (r["state"], r["attempts"], r["result"]) == ("completed", "1", "ok")
    assert jobs.connector.client.hget(K.metrics, "claimed") == "x"


# -- every transition, over every plant ---------------------------------------------------


def test_enqueue(jobs, plant):
    plant()
    ids = enqueue_n(jobs, 3)
    assert assert_one_place(jobs) == dict.fromkeys(ids, "pending")
    plant.check()


def test_claim_and_its_replay(jobs, plant):
    ids = enqueue_n(jobs, 3)
    plant()
    claim = jobs.claim(QUEUE, WORKER, count=2, claim_id="c1")
    assert [c.id for c in claim.jobs] == ids[:2]
    # The claim's record was written: the same claim again returns the same jobs.
    replay = jobs.claim(QUEUE, WORKER, count=2, claim_id="c1")
    assert [(c.id, c.token) for c in replay.jobs] == [(c.id, c.token) for c in claim.jobs]
    assert assert_one_place(jobs) == {ids[0]: "active", ids[1]: "active", ids[2]: "pending"}
    plant.check()


def test_complete(jobs, plant):
    enqueue_n(jobs, 2)
    claimed = one_claim(jobs, 2)
    plant()
    done = jobs.complete_many([(QUEUE, c.id, c.token, '"r"') for c in claimed])
    assert all(isinstance(d, int) for d in done)
    again = jobs.complete_many([(QUEUE, c.id, c.token, '"r"') for c in claimed])
    assert again == done  # idempotent: the same finished_at, nothing done twice
    assert set(assert_one_place(jobs).values()) == {"completed"}
    plant.check()


@pytest.mark.parametrize(
    "options, state",
    [({}, "pending"), ({"backoff_ms": 60000}, "scheduled"), ({"give_up": True}, "dead")],
    ids=["pending", "scheduled", "dead"],
)
def test_retry(jobs, plant, options, state):
    (job_id,) = enqueue_n(jobs, 1)
    (c,) = one_claim(jobs)
    plant()
    out = jobs.retry(QUEUE, job_id, c.token, error=error_json(), summary="boom", **options)
    assert out.state == state
    assert assert_one_place(jobs) == {job_id: state}
    kept = row(jobs, job_id)
    again = jobs.retry(QUEUE, job_id, c.token, error=error_json(), summary="boom", **options)
    assert again == out and row(jobs, job_id) == kept  # a lost reply, re-sent: no change
    plant.check()


def test_release(jobs, plant):
    (job_id,) = enqueue_n(jobs, 1)
    (c,) = one_claim(jobs)
    plant()
    jobs.release(QUEUE, job_id, c.token)
    assert assert_one_place(jobs) == {job_id: "pending"}
    assert row(jobs, job_id)["refunds"] == "1"
    with pytest.raises(StaleToken):
        jobs.release(QUEUE, job_id, c.token)
    assert row(jobs, job_id)["refunds"] == "1"
    plant.check()


def test_crashed(jobs, plant):
    (job_id,) = enqueue_n(jobs, 1)
    (c,) = one_claim(jobs)
    plant()
    assert jobs.crashed(QUEUE, job_id, c.token, why="killed", crash_budget=2).state == "pending"
    kept = row(jobs, job_id)
    assert jobs.crashed(QUEUE, job_id, c.token, why="killed", crash_budget=2).state == "pending"
    assert row(jobs, job_id) == kept  # a lost reply, re-sent: not a second crash
    (c,) = one_claim(jobs)
    assert jobs.crashed(QUEUE, job_id, c.token, why="killed", crash_budget=2).state == "dead"
    assert assert_one_place(jobs) == {job_id: "dead"}
    assert row(jobs, job_id)["crashes"] == "2"
    plant.check()


def test_reap(jobs, plant):
    back, cancelled = enqueue_n(jobs, 2)
    one_claim(jobs, 2, lease_ms=1)
    assert jobs.cancel(QUEUE, cancelled) == "cancelling"
    time.sleep(0.02)
    plant()
    swept = jobs.reap(QUEUE)
    assert (swept.moved, swept.dead) == (1, 1)
    assert jobs.reap(QUEUE).moved == 0
    assert assert_one_place(jobs) == {back: "pending", cancelled: "dead"}
    plant.check()


def test_cancel(jobs, plant):
    (job_id,) = enqueue_n(jobs, 1)
    plant()
    assert jobs.cancel(QUEUE, job_id) == "dead"
    assert assert_one_place(jobs) == {job_id: "dead"}
    assert row(jobs, job_id)["last_error"].startswith("Cancelled")
    plant.check()


def test_delete(jobs, plant):
    gone, kept = enqueue_n(jobs, 2)
    plant()
    assert jobs.delete(QUEUE, gone) == "pending"
    assert assert_one_place(jobs) == {kept: "pending"}
    plant.check()


def test_run_now(jobs, plant):
    (job_id,) = enqueue_n(jobs, 1, due_ms=server_ms(jobs.connector.client) + 60000)
    plant()
    jobs.run_now(QUEUE, job_id)
    assert assert_one_place(jobs) == {job_id: "pending"}
    plant.check()


def test_retry_dead(jobs, plant):
    (job_id,) = enqueue_n(jobs, 1)
    jobs.cancel(QUEUE, job_id)
    plant()
    assert jobs.retry_dead(QUEUE).moved == 1
    assert jobs.retry_dead(QUEUE).moved == 0
    assert assert_one_place(jobs) == {job_id: "pending"}
    plant.check()


def test_promote(jobs, plant):
    (job_id,) = enqueue_n(jobs, 1, due_ms=server_ms(jobs.connector.client) + 30)
    time.sleep(0.06)
    plant()
    assert jobs.promote(QUEUE).moved == 1
    assert jobs.promote(QUEUE).moved == 0
    assert assert_one_place(jobs) == {job_id: "pending"}
    plant.check()


@pytest.mark.parametrize("purge", [False, True], ids=["trim", "purge"])
def test_trim(jobs, plant, purge):
    _, kept = enqueue_n(jobs, 2, result_ttl_ms=1)
    for c in one_claim(jobs, 2):
        jobs.complete(QUEUE, c.id, c.token)
    jobs.connector.client.zadd(K.completed, {kept: server_ms(jobs.connector.client) + 60000})
    time.sleep(0.01)
    plant()
    assert jobs.trim(QUEUE, "completed", purge=purge).moved == (2 if purge else 1)
    assert assert_one_place(jobs) == ({} if purge else {kept: "completed"})
    plant.check()


# -- a corrupt sequence, a gate's key of another type: a move never strands a job ---------


def test_a_move_over_a_corrupt_sequence_completes(jobs):
    """The moves that take a fresh sequence (retry, run_now, retry_dead, promote) take it
    after the job left its place: a sequence that is not an integer keeps the job's place
    in line instead of failing the move halfway (the job in no place)."""
    client = jobs.connector.client
    retried, dead = enqueue_n(jobs, 2)
    (due,) = enqueue_n(jobs, 1, due_ms=server_ms(client) + 30)
    (later,) = enqueue_n(jobs, 1, due_ms=server_ms(client) + 60000)
    jobs.cancel(QUEUE, dead)
    (c,) = one_claim(jobs)
    assert c.id == retried
    time.sleep(0.06)
    client.set(K.seq, "not a number")
    assert (
        jobs.retry(QUEUE, retried, c.token, error=error_json(), summary="boom").state == "pending"
    )
    assert jobs.promote(QUEUE).moved == 1
    assert jobs.retry_dead(QUEUE).moved == 1
    jobs.run_now(QUEUE, later)
    assert assert_one_place(jobs) == dict.fromkeys((retried, dead, due, later), "pending")
    assert len(one_claim(jobs, 4)) == 4
    assert client.get(K.seq) == "not a number"


def test_a_corrupt_concurrency_gate_never_strands_a_popped_job(jobs):
    client = jobs.connector.client
    first, second = enqueue_n(jobs, 2, limits="conc:t/1")
    client.set(K.base + "gate:conc:t", "planted")  # the gate's ZSET of leases
    (c,) = one_claim(jobs)  # it admits: its cap is not enforced, its job never lost
    assert c.id == first
    jobs.complete(QUEUE, first, c.token)
    assert assert_one_place(jobs) == {first: "completed", second: "pending"}
    client.delete(K.base + "gate:conc:t")
    (c,) = one_claim(jobs)
    client.set(K.base + "held:conc:t", "planted")  # the line a refused job is parked on
    enqueue_n(jobs, 1, limits="conc:t/1")
    jobs.claim(QUEUE, WORKER, count=1)  # the cap is full: parking fails, leased instead
    assert set(assert_one_place(jobs).values()) <= {"completed", "active"}
    jobs.complete(QUEUE, second, c.token)
    assert jobs.stats(QUEUE).counts["active"] == 1


# -- schedules ----------------------------------------------------------------------------


@pytest.fixture
def scheduler(jobs) -> Scheduler:
    return Scheduler(jobs)


SCHEDULE_PLANTS: dict[str, Callable[[Any], object]] = {
    "fired": lambda c: c.hset(K.schedule("beat"), "fired", "x"),
    "missed": lambda c: c.hset(K.schedule("beat"), "missed", "x"),
    "skipped": lambda c: c.hset(K.schedule("beat"), "skipped", "x"),
    "metrics-string": lambda c: c.set(K.metrics, "planted"),
    "wake-string": lambda c: c.set(K.wake, "planted"),
}


@pytest.mark.parametrize("plant_one", list(SCHEDULE_PLANTS.values()), ids=list(SCHEDULE_PLANTS))
def test_fire_over_a_corrupt_counter(jobs, scheduler, plant_one):
    """Before: every fire failed after enqueueing its job, and the schedule's next fire
    time never moved: a new job at every pass."""
    client = jobs.connector.client
    scheduler.sync([every(overlap="allow")])
    plant_one(client)
    tick = whole_second(lambda: scheduler.read(QUEUE)[0])
    backdate(client, QUEUE, "beat", tick - 2000)
    (done,) = scheduler.fire_due([QUEUE]).fired
    assert (done.outcome, done.ids) == ("fired", (expected_id(QUEUE, "beat", tick),))
    stored = scheduler.get(QUEUE, "beat")
    assert stored is not None
    assert (stored.next_ms, stored.last_tick, stored.last_job) == (tick + 1000, tick, done.ids[0])
    again = [i for f in scheduler.fire_due([QUEUE]).fired for i in f.ids]
    assert done.ids[0] not in again  # the tick fired once
    assert assert_one_place(jobs)[done.ids[0]] == "pending"


@pytest.mark.parametrize("plant_one", list(SCHEDULE_PLANTS.values()), ids=list(SCHEDULE_PLANTS))
def test_schedule_run_now_over_a_corrupt_counter(jobs, scheduler, plant_one):
    scheduler.sync([every(overlap="allow")])
    plant_one(jobs.connector.client)
    job_id = scheduler.run_now(QUEUE, "beat")
    stored = scheduler.get(QUEUE, "beat")
    assert stored is not None and stored.last_job == job_id
    assert assert_one_place(jobs) == {job_id: "pending"}
