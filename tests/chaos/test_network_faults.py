"""Network faults mid-command: the client sees ServerUnavailable, the server is before or after.

Every transition is run through a TCP proxy that drops the request, delivers
half of it, swallows the reply, stalls it past the client's timeout, or
delivers it late. Then the whole keyspace is compared: it must equal the
snapshot taken before the call, or (the transition ran) exactly what a clean
run of the same call produces from the same state, clock readings aside. A
half-applied transition would match neither. Afterwards the same client works
again: redis-py reconnects on the next call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from echomq_django.engine.errors import EnqueueUnknown, JobExists, ServerUnavailable
from echomq_django.engine.jobs import Jobs, NewJob
from tests.chaos import snapshot
from tests.support.proxy import DELIVERED, Fault, FaultProxy

Q = "netq"


@dataclass(frozen=True)
class Case:
    """A transition: ``setup`` builds the state, ``op`` is the call under fault."""

    setup: Callable[[Jobs], dict[str, Any]]
    op: Callable[[Jobs, dict[str, Any]], Any]


def _pending(jobs: Jobs, n: int = 3) -> dict[str, Any]:
    ids = [jobs.enqueue(Q, NewJob(payload=f'{{"n": {i}}}', task="t")).id for i in range(n)]
    return {"ids": ids}


def _active(jobs: Jobs, lease_ms: int = 60_000) -> dict[str, Any]:
    state = _pending(jobs)
    claimed = jobs.claim(Q, "w-setup", count=2, lease_ms=lease_ms).jobs
    state["held"] = [(c.id, c.token) for c in claimed]
    return state


def _expired(jobs: Jobs) -> dict[str, Any]:
    state = _active(jobs, lease_ms=1)
    time.sleep(0.01)
    return state


def _dead(jobs: Jobs) -> dict[str, Any]:
    state = _pending(jobs, 2)
    for jid in state["ids"]:
        jobs.cancel(Q, jid)
    return state


def _dead_bound(jobs: Jobs) -> dict[str, Any]:
    """Dead jobs, and the dead set as an operator's retry of all of it was asked (its bound:
    a read, outside the transition under fault)."""
    return {**_dead(jobs), "bound": jobs.bound(Q, "dead")}


def _scheduled(jobs: Jobs) -> dict[str, Any]:
    far = jobs.claim(Q, "w-probe").now_ms + 3_600_000  # an empty claim reads the server clock
    job = jobs.enqueue(Q, NewJob(payload="{}", due_ms=far))
    return {"ids": [job.id]}


ERROR = '{"exception_class_path": "builtins.ValueError", "traceback": "boom"}'
NEW_ID = "01900000-0000-7000-8000-000000000001"

# One script call each; pipelines (many calls, each its own transition) are below.
CASES: dict[str, Case] = {
    "enqueue": Case(lambda j: {}, lambda j, s: j.enqueue(Q, NewJob(id=NEW_ID, payload="[1]"))),
    "claim": Case(
        _pending, lambda j, s: j.claim(Q, "w1", count=2, lease_ms=60_000, claim_id="w1#1")
    ),
    "complete": Case(_active, lambda j, s: j.complete(Q, *s["held"][0], result='"ok"')),
    "retry": Case(
        _active, lambda j, s: j.retry(Q, *s["held"][0], error=ERROR, summary="ValueError: boom")
    ),
    "retry_backoff": Case(
        _active,
        lambda j, s: j.retry(Q, *s["held"][0], error=ERROR, summary="x", backoff_ms=60_000),
    ),
    "extend": Case(_active, lambda j, s: j.extend(Q, *s["held"][0], 90_000)),
    "release": Case(_active, lambda j, s: j.release(Q, *s["held"][0])),
    "reap": Case(_expired, lambda j, s: j.reap(Q)),
    "cancel": Case(_pending, lambda j, s: j.cancel(Q, s["ids"][2])),
    "retry_dead": Case(_dead_bound, lambda j, s: j.retry_dead(Q, bound=s["bound"])),
    "purge": Case(_dead_bound, lambda j, s: j.purge(Q, "dead", bound=s["bound"])),
    "delete": Case(_pending, lambda j, s: j.delete(Q, s["ids"][1])),
    "run_now": Case(_scheduled, lambda j, s: j.run_now(Q, s["ids"][0])),
}


def _clean_run(direct: Jobs, raw, saved, case: Case, state: dict[str, Any]) -> snapshot.Dump:
    """What the transition produces when nothing goes wrong, from the same saved state."""
    snapshot.restore(raw, saved)
    case.op(direct, state)
    return snapshot.normalized(snapshot.dump(raw))


@pytest.mark.parametrize("fault", list(Fault), ids=lambda f: f.value)
@pytest.mark.parametrize("name", list(CASES))
def test_a_fault_leaves_the_state_before_or_after_never_half(
    name: str, fault: Fault, direct: Jobs, proxied: Jobs, proxy: FaultProxy, redis_client
):
    case = CASES[name]
    direct.register_queue(Q)
    proxied.register_queue(Q)
    state = case.setup(direct)
    saved = snapshot.save(redis_client)
    before = snapshot.dump(redis_client)

    fired = proxy.arm(fault)
    with pytest.raises(ServerUnavailable):
        case.op(proxied, state)
    assert fired.wait(5), "the fault never fired: the call did not cross the proxy"

    faulted = snapshot.dump(redis_client)
    assert not snapshot.places(redis_client, Q)
    if fault in DELIVERED:
        assert faulted != before, "the server saw the whole request, so the transition ran"
        assert snapshot.normalized(faulted) == _clean_run(direct, redis_client, saved, case, state)
    else:
        assert faulted == before, "the server never got the whole request: nothing may change"

    # The same client carries on: its next call reconnects through the proxy.
    assert proxied.stats(Q).queue == Q
    assert proxy.connections >= 2


@pytest.mark.parametrize("fault", [Fault.HALF_REQUEST, Fault.DROP_REPLY], ids=lambda f: f.value)
def test_a_cut_pipeline_leaves_each_job_whole(
    fault: Fault, direct: Jobs, proxied: Jobs, proxy: FaultProxy, redis_client
):
    """A pipelined batch cut midway: some enqueues ran, some did not; none ran halfway."""
    proxied.register_queue(Q)
    batch = [NewJob(payload="p" * 2000) for _ in range(200)]  # ~400 KB: several TCP chunks
    proxy.arm(fault)
    with pytest.raises(EnqueueUnknown) as unknown:
        proxied.enqueue_many(Q, batch)
    assert unknown.value.job_ids == tuple(j.id for j in batch)  # what to look up
    stored = [j for j in batch if redis_client.exists(f"emq:{{{Q}}}:job:{j.id}")]
    assert not snapshot.places(redis_client, Q)
    assert redis_client.zcard(f"emq:{{{Q}}}:pending") == len(stored)
    assert int(redis_client.hget(f"emq:{{{Q}}}:metrics", "enqueued") or 0) == len(stored)
    if fault is Fault.DROP_REPLY:
        assert stored, "the first chunk reached the server"
    for job in stored:
        assert direct.get(Q, job.id).payload == job.payload


@pytest.mark.parametrize("fault", list(Fault), ids=lambda f: f.value)
def test_an_enqueue_retried_after_a_fault_stores_one_job(
    fault: Fault, direct: Jobs, proxied: Jobs, proxy: FaultProxy, redis_client
):
    """The caller cannot know whether a failed enqueue ran: retrying it is safe.

    With an idempotency key the retry returns the job stored by the first call
    (or stores it now); with a fixed id, an id that exists means it was stored.
    """
    proxied.register_queue(Q)
    keyed = NewJob(payload="[1]", idempotency_key="order-42")
    proxy.arm(fault)
    with pytest.raises(EnqueueUnknown, match="may or may not be stored") as unknown:
        proxied.enqueue(Q, keyed)
    assert unknown.value.job_ids == (keyed.id,)
    again = proxied.enqueue(Q, NewJob(payload="[1]", idempotency_key="order-42"))
    if fault in DELIVERED:
        assert (again.id, again.created) == (keyed.id, False)
    else:
        assert again.created

    fixed = NewJob(id=NEW_ID, payload="[2]")
    proxy.arm(fault)
    with pytest.raises(ServerUnavailable):
        proxied.enqueue(Q, fixed)
    if fault in DELIVERED:
        with pytest.raises(JobExists):
            proxied.enqueue(Q, fixed)
    else:
        assert proxied.enqueue(Q, fixed).created
    assert direct.stats(Q).counts["pending"] == 2
    assert not snapshot.places(redis_client, Q)
