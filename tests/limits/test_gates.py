"""Rate limits and concurrency caps in the claim, and the scripts that free a slot.

Each test fails on the engine before flow control: a claim then takes every job.
"""

from __future__ import annotations

import time

import pytest

from echomq_django.engine.errors import InvalidJobOptions
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.limits import (
    MAX_PERIOD_MS,
    RateLimit,
    concurrency_gate,
    validate_limits,
)
from echomq_django.engine.scheduler import Scheduler
from echomq_django.engine.schedules import Schedule
from echomq_django.flow import queue_rate_limits

Q = "q"
ERROR = '{"exception_class_path": "builtins.ValueError", "traceback": "boom"}'


def limited(jobs: Jobs, n: int, limits: str, task: str = "t.limited") -> list[str]:
    batch = [NewJob(payload=f'{{"n": {i}}}', task=task, limits=limits) for i in range(n)]
    return [e.id for e in jobs.enqueue_many(Q, batch)]


def free(jobs: Jobs, n: int) -> list[str]:
    batch = [NewJob(payload="{}", task="t.free") for _ in range(n)]
    return [e.id for e in jobs.enqueue_many(Q, batch)]


def test_a_rate_limited_task_holds_back_in_order_and_lets_other_tasks_through(jobs):
    ids = limited(jobs, 6, RateLimit.parse("2/m burst 2").gate("t.limited"))
    others = free(jobs, 3)
    claim = jobs.claim(Q, "w1", count=10)
    got = [c.id for c in claim.jobs]
    assert got == ids[:2] + others  # the burst, then the other task behind the held ones
    # The next token is 30 s away: the claim says so (the worker waits that long).
    assert 29_000 <= claim.next_due_ms - claim.now_ms <= 30_001
    again = jobs.claim(Q, "w1", count=10)
    assert again.jobs == [] and again.next_due_ms - again.now_ms > 29_000
    # Held back, they are still pending, and wait in their order.
    assert {jobs.get(Q, i).state for i in ids[2:]} == {"pending"}
    (gate,) = jobs.limits(Q)
    assert (gate.kind, gate.scope, gate.waiting) == ("rate", "t.limited", 4)
    assert gate.level < 0.01 and gate.describe == "2 per m, burst 2"


def test_tokens_refill_on_the_server_clock(jobs):
    ids = limited(jobs, 4, RateLimit.parse("20/s").gate("t.limited"))
    first = jobs.claim(Q, "w1", count=10)
    assert [c.id for c in first.jobs] == ids[:1]
    assert 0 < first.next_due_ms - first.now_ms <= 51  # 50 ms, rounded up to the ms
    time.sleep(0.06)
    assert [c.id for c in jobs.claim(Q, "w1", count=10).jobs] == ids[1:2]


@pytest.mark.parametrize("end", ["complete", "retry", "release", "cancel", "delete", "expire"])
def test_a_cap_slot_is_freed_by_each_way_a_lease_ends(jobs, end):
    ids = limited(jobs, 2, concurrency_gate("t.limited", 1))
    lease = 60_000 if end != "expire" else 50
    (held,) = jobs.claim(Q, "w1", count=10, lease_ms=lease).jobs
    blocked = jobs.claim(Q, "w2", count=10)
    assert blocked.jobs == [] and blocked.next_due_ms is not None
    if end == "complete":
        jobs.complete(Q, held.id, held.token)
    elif end == "retry":
        jobs.retry(Q, held.id, held.token, error=ERROR, summary="x")
    elif end == "release":
        jobs.release(Q, held.id, held.token)
    elif end == "cancel":
        jobs.cancel(Q, ids[1])  # the waiting one: it leaves its line
        jobs.complete(Q, held.id, held.token)
        assert jobs.limits(Q)[0].waiting == 0
        return
    elif end == "delete":  # a running job is not deleted: this one's holder is gone
        jobs.connector.client.zadd(QueueKeys.of(Q).active, {held.id: 1}, xx=True)
        jobs.delete(Q, held.id)
    else:  # the worker died: its slot frees itself when the lease ends, reaper or not
        time.sleep(0.08)
    nxt = jobs.claim(Q, "w2", count=10).jobs
    assert len(nxt) == 1


def test_reap_and_extend_keep_the_slot_with_the_lease(jobs):
    limited(jobs, 2, concurrency_gate("t.limited", 1))
    (held,) = jobs.claim(Q, "w1", count=10, lease_ms=200).jobs
    jobs.extend(Q, held.id, held.token, 60_000)
    time.sleep(0.25)
    assert jobs.claim(Q, "w2", count=10).jobs == []  # renewed: still its slot
    jobs.connector.client.zadd(QueueKeys.of(Q).active, {held.id: 1}, xx=True)  # lease lost
    jobs.reap(Q)
    assert len(jobs.claim(Q, "w2", count=10).jobs) == 1


def test_a_keyed_cap_counts_each_key_alone(jobs):
    a = limited(jobs, 2, concurrency_gate("t.sync", 1, "customer-a"))
    b = limited(jobs, 2, concurrency_gate("t.sync", 1, "customer-b"))
    got = [c.id for c in jobs.claim(Q, "w1", count=10).jobs]
    assert got == [a[0], b[0]]
    (family,) = jobs.limits(Q)  # the task's keyed caps, counted together
    assert (family.name, family.keys, family.level, family.waiting) == ("conc:t.sync#*", 2, 2, 2)


@pytest.mark.parametrize(
    "before, after, admitted",
    [
        (concurrency_gate("t.limited", 1), concurrency_gate("t.limited", 3), 3),  # raised
        (concurrency_gate("t.limited", 4), concurrency_gate("t.limited", 1), 1),  # lowered
        (RateLimit.parse("100/s burst 100").gate("t.limited"),
         RateLimit.parse("1/m").gate("t.limited"), 1),
    ],
    ids=["cap-raised", "cap-lowered", "rate-lowered"],
)  # fmt: skip
def test_a_changed_limit_holds_for_the_jobs_enqueued_before_it(jobs, before, after, admitted):
    """A deploy changes a limit: the jobs already waiting follow the new rule (they
    kept the one they were enqueued with: a lowered cap was exceeded until they ran)."""
    waiting = limited(jobs, 4, before)
    limited(jobs, 1, after)
    assert [c.id for c in jobs.claim(Q, "w1", count=10).jobs] == waiting[:admitted]
    (gate,) = jobs.limits(Q)
    assert gate.waiting == 5 - admitted


def test_a_raised_rate_limit_holds_at_once(jobs):
    """The rate state a slow rule left (an hour ahead, for 1/h) is not the new rule's:
    raised by a deploy (a typo undone in an incident), it admits the waiting jobs at
    the new rate, the old ones first, not an hour later."""
    slow = limited(jobs, 4, RateLimit.parse("1/h").gate("t.limited"))
    assert [c.id for c in jobs.claim(Q, "w1", count=10).jobs] == slow[:1]
    assert jobs.claim(Q, "w1", count=10).jobs == []  # the others wait an hour
    fast = limited(jobs, 3, RateLimit.parse("20/s burst 10").gate("t.limited"))
    claimed: list[str] = []
    deadline = time.monotonic() + 5
    while len(claimed) < 6 and time.monotonic() < deadline:
        claimed += [c.id for c in jobs.claim(Q, "w1", count=10).jobs]
    assert claimed == slow[1:] + fast


def test_a_keyed_cap_keeps_each_rows_own_rule(jobs):
    """One gate per key: no rule is kept for them, each row's holds."""
    first = limited(jobs, 2, concurrency_gate("t.sync", 2, "customer-a"))
    limited(jobs, 1, concurrency_gate("t.sync", 1, "customer-a"))
    assert [c.id for c in jobs.claim(Q, "w1", count=10).jobs] == first


def test_bad_limits_are_refused_before_anything_is_sent(jobs):
    for bad in ["10/x", "0/s", "ten", "10/s burst 0", None, 10]:
        with pytest.raises(InvalidJobOptions):
            RateLimit.parse(bad)
    for bad in ["rate:x/1", "conc:a b/1", "nope:x/1", "conc:x/1 " * 5, "\udcff"]:
        with pytest.raises(InvalidJobOptions):
            validate_limits(bad)
        with pytest.raises(InvalidJobOptions):
            jobs.enqueue(Q, NewJob(payload="{}", limits=bad))
    with pytest.raises(InvalidJobOptions):
        concurrency_gate("t.x", 1, "\udcff")
    assert jobs.stats(Q).counts["pending"] == 0


def test_a_schedules_jobs_carry_their_tasks_limits(jobs):
    cap = concurrency_gate("t.limited", 1)
    job = NewJob(payload="{}", task="t.limited", limits=cap)
    scheduler = Scheduler(jobs)
    scheduler.sync([Schedule(name="beat", queue=Q, job=job, every_ms=60_000)])
    fired = [scheduler.run_now(Q, "beat") for _ in range(2)]
    assert [jobs.get(Q, i).limits for i in fired] == [cap, cap]
    assert len(jobs.claim(Q, "w1", count=10).jobs) == 1  # the cap holds for them too


def test_debounce_takes_a_held_back_job_off_its_limits_line(jobs):
    rate = RateLimit.parse("1/m").gate("t.limited")
    first, held = limited(jobs, 2, rate)  # both limited; the second will be held back
    jobs.enqueue(Q, NewJob(payload="{}", task="t.limited", limits=rate, idempotency_key="k"))
    assert [c.id for c in jobs.claim(Q, "w1", count=10).jobs] == [first]  # the token
    assert jobs.limits(Q)[0].waiting == 2 and jobs.get(Q, held).state == "pending"
    again = jobs.enqueue(
        Q, NewJob(payload='{"v": 2}', task="t.limited", idempotency_key="k", debounce_ms=60_000)
    )
    assert (again.created, again.debounced, again.state) == (False, True, "scheduled")
    row = jobs.get(Q, again.id)
    assert (row.payload, row.limits, row.state) == ('{"v": 2}', "", "scheduled")
    assert jobs.limits(Q)[0].waiting == 1  # only `held` waits on the limit now


def test_throttle_and_debounce_are_refused_without_a_key_or_together(jobs):
    for fields in [{"throttle_ms": 1000}, {"debounce_ms": 1000},
                   {"throttle_ms": 1, "debounce_ms": 1, "idempotency_key": "k"}]:  # fmt: skip
        with pytest.raises(InvalidJobOptions):
            jobs.enqueue(Q, NewJob(payload="{}", **fields))
    assert jobs.stats(Q).metrics.get("enqueued", 0) == 0


def test_the_longest_period_that_parses_is_the_longest_an_enqueue_takes(jobs):
    """A period past the gate's bound passed parsing and the check (E006, which parses
    RATE_LIMITS), then failed every enqueue, as "at most 4 gate specs"."""
    longest = RateLimit.parse("1/11574d")  # 999,993,600,000 ms
    jobs.enqueue(Q, NewJob(payload="{}", limits=longest.gate("t.slow")))
    assert validate_limits(f"rate:*/1/{MAX_PERIOD_MS}/1")
    with pytest.raises(InvalidJobOptions):
        validate_limits(f"rate:*/1/{MAX_PERIOD_MS + 1}/1")
    for written in (RateLimit.parse, lambda v: queue_rate_limits({"default": v})):
        with pytest.raises(InvalidJobOptions, match=f"period must be from 1 ms to {MAX_PERIOD_MS}"):
            written("1/11575d")  # 1,000,080,000,000 ms: refused where it is written
