"""What an operator sees of a queue's limits with many keyed caps in use.

A keyed cap (``concurrency_key``) is one gate per key: with a thousand customers in
use there are a thousand. The queue's own gates (its rate limit, each task's rate limit
and cap) must stay listed whatever their number, the keyed caps come as one entry per
task (keys in use, running, waiting: never one per key), and the read costs the server
the same whatever the number of keys.
"""

from __future__ import annotations

import time

import pytest

from echomq_django.engine.errors import InvalidJobOptions
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.limits import RateLimit, concurrency_gate, validate_limits

Q = "q"
QUEUE_RATE = RateLimit.parse("100000/s burst 100000").gate("*")
TASK_RATE = RateLimit.parse("100000/s burst 100000").gate("t.sync")
UNKEYED_CAP = concurrency_gate("t.capped", 5)
KEYS = 1_200


def keyed(customer: int, cap: int = 1) -> str:
    return f"{QUEUE_RATE} {TASK_RATE} {concurrency_gate('t.sync', cap, f'customer-{customer}')}"


def enqueue(jobs: Jobs, limits: list[str], task: str = "t.sync") -> list[str]:
    ids: list[str] = []
    for at in range(0, len(limits), 500):
        batch = [NewJob(payload="{}", task=task, limits=lim) for lim in limits[at : at + 500]]
        ids += [e.id for e in jobs.enqueue_many(Q, batch)]
    return ids


def claim_all(jobs: Jobs) -> list[tuple[str, int]]:
    leased: list[tuple[str, int]] = []
    while True:
        got = jobs.claim(Q, "w1", count=500, lease_ms=60_000).jobs
        if not got and jobs.stats(Q).counts["pending"] == 0:
            return leased
        leased += [(c.id, c.token) for c in got]


def many_keys_in_use(jobs: Jobs, keys: int = KEYS, first: int = 0) -> list[tuple[str, int]]:
    """``keys`` customers with one job running each and one held back on its key's cap,
    beside the queue's rate limit, the task's rate limit and another task's cap."""
    enqueue(jobs, [f"{QUEUE_RATE} {UNKEYED_CAP}"] * 2, task="t.capped")
    customers = range(first, first + keys)
    enqueue(jobs, [keyed(n) for n in customers])
    leased = claim_all(jobs)
    assert len(leased) == keys + 2
    enqueue(jobs, [keyed(n) for n in customers])  # a second job per key: it waits
    assert claim_all(jobs) == []
    return leased


def by_name(jobs: Jobs) -> dict[str, object]:
    return {g.name: g for g in jobs.limits(Q)}


def test_every_unkeyed_gate_is_listed_and_keyed_caps_come_as_one_entry_per_task(jobs):
    many_keys_in_use(jobs)
    gates = jobs.limits(Q)
    names = [g.name for g in gates]
    assert names == ["conc:t.capped", "conc:t.sync#*", "rate:*", "rate:t.sync"]
    queue_rate = next(g for g in gates if g.name == "rate:*")
    assert queue_rate.kind == "rate" and queue_rate.level > 90_000 and queue_rate.keys is None
    capped = next(g for g in gates if g.name == "conc:t.capped")
    assert (capped.level, capped.waiting, capped.keys) == (2, 0, None)
    family = next(g for g in gates if g.name == "conc:t.sync#*")
    assert (family.kind, family.scope) == ("conc", "t.sync#*")
    # Aggregated over the task's keys: keys in use, jobs running, jobs held back.
    assert (family.keys, family.level, family.waiting) == (KEYS, KEYS, KEYS)
    assert family.describe == "at most 1 at once per key"


def test_the_read_costs_the_same_whatever_the_number_of_keys(jobs, redis_client):
    """Bounded work per call: the commands the stats script runs do not grow with the
    keys in use (the hash of rules holds no entry per key)."""

    def commands_of_one_read() -> int:
        redis_client.config_resetstat()
        jobs.limits(Q)
        stats = redis_client.info("commandstats")
        return sum(
            v["calls"]
            for k, v in stats.items()
            if k.removeprefix("cmdstat_") not in {"evalsha", "eval", "info", "config|resetstat"}
        )

    many_keys_in_use(jobs, keys=3)
    few = commands_of_one_read()
    many_keys_in_use(jobs, keys=KEYS, first=3)  # the same tasks, 1,200 more keys in use
    assert commands_of_one_read() == few
    assert by_name(jobs)["conc:t.sync#*"].keys == KEYS + 3


def test_keys_leave_the_counts_as_their_jobs_end_and_the_entry_stays(jobs):
    leased = many_keys_in_use(jobs, keys=20)
    for job_id, token in leased:
        jobs.complete(Q, job_id, token)
    # Each key's waiting job is let in by its freed slot, the aggregate follows.
    second = claim_all(jobs)
    assert len(second) == 20
    family = by_name(jobs)["conc:t.sync#*"]
    assert (family.keys, family.level, family.waiting) == (20, 20, 0)
    for job_id, token in second:
        jobs.complete(Q, job_id, token)
    family = by_name(jobs)["conc:t.sync#*"]
    # No job left: the series stays (an alert on it never goes absent), at zero.
    assert (family.keys, family.level, family.waiting) == (0, 0, 0)
    client = jobs.connector.client
    base = QueueKeys.of(Q).base
    assert client.hlen(QueueKeys.of(Q).limits) == 4  # the rules: no entry per key
    assert not client.exists(f"{base}keys:conc:t.sync#*", f"{base}gate:conc:t.sync#*")


def test_a_held_job_cancelled_or_let_in_leaves_the_waiting_count(jobs):
    (first,) = enqueue(jobs, [keyed(1)])
    held = enqueue(jobs, [keyed(1), keyed(1)])
    (lease,) = jobs.claim(Q, "w1", count=10).jobs
    assert lease.id == first
    assert by_name(jobs)["conc:t.sync#*"].waiting == 2
    jobs.cancel(Q, held[0])
    assert by_name(jobs)["conc:t.sync#*"].waiting == 1
    jobs.complete(Q, lease.id, lease.token)
    (nxt,) = jobs.claim(Q, "w1", count=10).jobs
    assert nxt.id == held[1]
    family = by_name(jobs)["conc:t.sync#*"]
    assert (family.keys, family.level, family.waiting) == (1, 1, 0)


def test_the_running_count_follows_a_lease_renewed_or_run_out(jobs):
    enqueue(jobs, [keyed(1), keyed(2)])
    a, _ = jobs.claim(Q, "w1", count=10, lease_ms=300).jobs
    jobs.extend(Q, a.id, a.token, 60_000)
    time.sleep(0.35)  # the other lease ran out: its slot is free, a's was renewed
    assert by_name(jobs)["conc:t.sync#*"].level == 1


def test_a_keyed_caps_entry_left_by_an_earlier_version_is_not_listed(jobs):
    """Earlier versions kept one entry per key in the rules' hash: such an entry is not
    a gate of its own, and goes when its key goes idle."""
    gate = concurrency_gate("t.sync", 1, "customer-1")
    name = gate.partition("/")[0]
    jobs.connector.client.hset(QueueKeys.of(Q).limits, name, gate)
    enqueue(jobs, [keyed(1)])
    assert [g.name for g in jobs.limits(Q)] == ["conc:t.sync#*", "rate:*", "rate:t.sync"]
    (lease,) = jobs.claim(Q, "w1", count=10).jobs
    jobs.complete(Q, lease.id, lease.token)
    assert not jobs.connector.client.hexists(QueueKeys.of(Q).limits, name)


@pytest.mark.parametrize("bad", ["conc:t#*/1", "conc:t#/1", "conc:t#a#b/1", "rate:t#k/1/1000/1"])
def test_a_gate_name_that_could_pass_for_a_tasks_keyed_caps_is_refused(bad):
    with pytest.raises(InvalidJobOptions):
        validate_limits(bad)


def test_a_family_key_of_another_type_loses_its_count_never_a_job(jobs):
    """The family's keys are bookkeeping (pcalls, as the gates'): a key of another type
    planted at one fails no claim, park, cancel or completion, and reads as zero."""
    client, base = jobs.connector.client, QueueKeys.of(Q).base
    for kind in ("gate", "held", "keys"):
        client.set(f"{base}{kind}:conc:t.sync#*", "planted")
    first, *held = enqueue(jobs, [keyed(1), keyed(1), keyed(1)])
    (lease,) = jobs.claim(Q, "w1", count=10).jobs
    assert lease.id == first and jobs.get(Q, held[0]).state == "pending"
    jobs.extend(Q, lease.id, lease.token, 60_000)
    jobs.cancel(Q, held[0])
    family = by_name(jobs)["conc:t.sync#*"]
    assert (family.keys, family.level, family.waiting) == (0, 0, 0)
    jobs.complete(Q, lease.id, lease.token)
    (nxt,) = jobs.claim(Q, "w1", count=10).jobs
    assert nxt.id == held[1]
    jobs.complete(Q, nxt.id, nxt.token)
    assert jobs.stats(Q).counts["completed"] == 2
