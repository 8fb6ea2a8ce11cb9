"""A late extension of a lease whose concurrency slot was given away.

A worker's heartbeat can fail to reach the server for longer than the lease. Before
the reaper sweeps the job, a claim drops the expired slot (includes/limits.lua,
gate_room) and admits the next job. The first worker's extend must not revive its
lease on top of that one: it re-takes its slot if the cap has room now, and is
refused as a lost lease (StaleToken) otherwise. Without the check, extend renewed the
lease and silently did not re-add the slot: two live leases under a cap of one.
"""

from __future__ import annotations

import threading

import pytest

from echomq_django.engine.errors import StaleToken
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.limits import concurrency_gate
from echomq_django.engine.worker import Success
from tests.support.running import worker_starter
from tests.support.waiting import wait_until

Q = "q"
TASK = "t.limited"


def enqueue(jobs: Jobs, n: int, limits: str = "") -> list[str]:
    batch = [NewJob(payload=f"[{i}]", task=TASK, limits=limits) for i in range(n)]
    return [e.id for e in jobs.enqueue_many(Q, batch)]


def server_ms(client) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def await_expiry(client, job_id: str) -> None:
    """Until the server's clock is past the job's lease (no reaper runs here)."""
    deadline = client.zscore(QueueKeys.of(Q).active, job_id)
    assert deadline is not None
    wait_until(lambda: server_ms(client) > deadline, timeout=5)


def live_leases(client) -> list[str]:
    """The active jobs whose lease has not run out, on the server's clock."""
    now = server_ms(client)
    return [m.decode() for m in client.zrangebyscore(QueueKeys.of(Q).active, f"({now}", "+inf")]


def slots(client, gate: str) -> dict[str, float]:
    name = gate.split("/", 1)[0]
    return {
        m.decode(): s for m, s in client.zrange(f"emq:{{{Q}}}:gate:{name}", 0, -1, withscores=True)
    }


def test_a_late_extend_past_a_full_cap_is_refused(jobs, redis_client):
    """The reviewer's reproduction: on the old scripts the extend was accepted and two
    leases ran under a cap of one until the revived job ended."""
    gate = concurrency_gate(TASK, 1)
    enqueue(jobs, 3, gate)
    (a,) = jobs.claim(Q, "w1", count=10, lease_ms=50).jobs
    await_expiry(redis_client, a.id)  # its lease ran out; no reaper swept it
    (b,) = jobs.claim(Q, "w2", count=10, lease_ms=60_000).jobs  # a's slot dropped, b admitted
    before = jobs.get(Q, a.id)
    refused = None
    try:
        jobs.extend(Q, a.id, a.token, 60_000)
    except StaleToken as exc:
        refused = exc
    assert live_leases(redis_client) == [b.id]  # at most 1 leased at once
    assert refused is not None and "slot" in str(refused)
    # Refused before any write: a's lease stays as it ran out, b alone holds the slot.
    after = jobs.get(Q, a.id)
    assert (after.state, after.lease_deadline) == ("active", before.lease_deadline)
    assert list(slots(redis_client, gate)) == [b.id]
    # The reaper returns the job as after any lost lease.
    assert jobs.reap(Q).moved == 1
    assert jobs.get(Q, a.id).state == "pending"


@pytest.mark.parametrize("freed_by", ["room", "complete"])
def test_a_late_extend_retakes_its_slot_when_the_cap_has_room(jobs, redis_client, freed_by):
    """Its slot dropped, the lease goes on if the cap admits it now: counted again."""
    cap = 2 if freed_by == "room" else 1
    gate = concurrency_gate(TASK, cap)
    ids = enqueue(jobs, 3, gate)
    (a,) = jobs.claim(Q, "w1", count=1, lease_ms=50).jobs
    await_expiry(redis_client, a.id)
    (b,) = jobs.claim(Q, "w2", count=1, lease_ms=60_000).jobs
    assert a.id not in slots(redis_client, gate)  # the claim dropped a's expired slot
    if freed_by == "complete":
        jobs.complete(Q, b.id, b.token)
    deadline = jobs.extend(Q, a.id, a.token, 60_000)
    held = slots(redis_client, gate)
    assert held[a.id] == deadline == redis_client.zscore(QueueKeys.of(Q).active, a.id)
    assert jobs.get(Q, a.id).lease_deadline == deadline
    assert len(held) == cap
    # Counted again: the cap is full, the third job waits.
    assert jobs.claim(Q, "w3", count=10).jobs == []
    assert jobs.get(Q, ids[2]).state == "pending"
    jobs.complete(Q, a.id, a.token)
    (c,) = jobs.claim(Q, "w3", count=10).jobs
    assert c.id == ids[2]


def test_a_late_extend_that_kept_its_slot_is_unchanged(jobs, redis_client):
    """Expired, but no claim dropped the slot: renewed as always, the slot with it."""
    gate = concurrency_gate(TASK, 1)
    enqueue(jobs, 1, gate)
    (a,) = jobs.claim(Q, "w1", count=10, lease_ms=50).jobs
    await_expiry(redis_client, a.id)
    assert a.id in slots(redis_client, gate)
    deadline = jobs.extend(Q, a.id, a.token, 60_000)
    assert slots(redis_client, gate) == {a.id: deadline}
    assert live_leases(redis_client) == [a.id]


def test_an_ungated_late_extend_is_unchanged(jobs, redis_client):
    (old, new) = enqueue(jobs, 2)
    (a,) = jobs.claim(Q, "w1", count=1, lease_ms=50).jobs
    assert a.id == old
    await_expiry(redis_client, a.id)
    (b,) = jobs.claim(Q, "w2", count=1, lease_ms=60_000).jobs
    assert b.id == new
    deadline = jobs.extend(Q, a.id, a.token, 60_000)
    assert redis_client.zscore(QueueKeys.of(Q).active, a.id) == deadline
    assert jobs.get(Q, a.id).lease_deadline == deadline
    assert sorted(live_leases(redis_client)) == sorted([a.id, b.id])


class HeldBeats(Jobs):
    """A worker's Jobs whose extends wait while ``held`` is clear: its heartbeat cannot
    reach the server (the outage the defect needs), everything else goes through."""

    def __init__(self, connector) -> None:
        super().__init__(connector)
        self.through = threading.Event()
        self.waiting = threading.Event()

    def extend_many(self, items, *, ran_us=None):
        self.waiting.set()
        self.through.wait(30)
        return super().extend_many(items, ran_us=ran_us)


def test_a_worker_whose_late_extend_is_refused_discards_its_outcome(connector, jobs, redis_client):
    """A real worker: its heartbeat is held past the lease, another worker takes the
    slot, then the heartbeat's extend is refused; the worker counts the lease lost and
    never completes the job over the cap."""
    gate = concurrency_gate(TASK, 1)
    (a_id,) = enqueue(jobs, 1, gate)
    running, finish = threading.Event(), threading.Event()

    def handler(claimed):
        running.set()
        finish.wait(30)
        return Success("zombie")

    held = HeldBeats(connector)
    with worker_starter(held, (Q,), lease_ms=300) as start:
        rw = start(handler, concurrency=1)
        try:
            assert running.wait(10)
            assert held.waiting.wait(10)  # the first renewal is stuck
            await_expiry(redis_client, a_id)
            (b_id,) = enqueue(jobs, 1, gate)
            (b,) = jobs.claim(Q, "w2", count=10, lease_ms=60_000).jobs
            assert b.id == b_id
            held.through.set()  # the heartbeat gets through, late
            wait_until(lambda: rw.worker.stats.lost == 1, timeout=10)
            assert live_leases(redis_client) == [b_id]
        finally:  # a failure must not leave the worker stuck in its task or heartbeat
            held.through.set()
            finish.set()
        stats = rw.stop()
    assert (stats.lost, stats.completed) == (1, 0)
    a = jobs.get(Q, a_id)
    assert (a.state, a.result) == ("active", None)  # not completed over b's slot
    assert live_leases(redis_client) == [b_id]
