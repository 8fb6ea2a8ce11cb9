"""retry_dead keeps idempotency keys unique: a dead job whose key a newer live job
holds is refused (it stays dead and says why), and "retry all" reads past such
jobs instead of stopping at them or looping on them."""

from __future__ import annotations

from .conftest import QUEUE, WORKER, assert_one_place, error_json, new


def kill(jobs, count: int) -> list[str]:
    claimed = jobs.claim(QUEUE, WORKER, count=count).jobs
    for c in claimed:
        jobs.retry(QUEUE, c.id, c.token, error=error_json(), summary="x", give_up=True)
    return [c.id for c in claimed]


def test_retry_all_reads_past_refused_jobs_in_bounded_calls(jobs):
    keyed = [jobs.enqueue(QUEUE, new(idempotency_key=f"k{i}")).id for i in range(5)]
    kill(jobs, 5)  # the five keyed jobs are the oldest dead: at the front of the set
    plain = [jobs.enqueue(QUEUE, new()).id for _ in range(7)]
    kill(jobs, 7)
    holders = [jobs.enqueue(QUEUE, new(idempotency_key=f"k{i}")).id for i in range(5)]

    sweep = jobs.retry_dead(QUEUE, limit=2)
    assert sweep.moved == 7, "every job whose key is free is retried"
    assert sweep.calls <= 7, sweep  # each call moves something until none is left
    places = assert_one_place(jobs)
    assert all(places[j] == "dead" for j in keyed)
    assert all(places[j] == "pending" for j in [*plain, *holders])
    for dead_id, holder in zip(keyed, holders, strict=True):
        assert jobs.get(QUEUE, dead_id).last_error.endswith(f"live job {holder}")
    assert jobs.stats(QUEUE).metrics["revive_refused"] == 5, "counted once per job"
    assert jobs.retry_dead(QUEUE).moved == 0  # still refused, and the sweep ends

    for c in jobs.claim(QUEUE, WORKER, count=20).jobs:  # the holders finish
        jobs.complete(QUEUE, c.id, c.token)
    assert jobs.retry_dead(QUEUE).moved == 5, "free again: retried"
    assert {jobs.enqueue(QUEUE, new(idempotency_key=f"k{i}")).id for i in range(5)} == set(keyed)
