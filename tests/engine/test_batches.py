"""Batched enqueue and complete: each job refused or moved as if it were alone.

One script call carries many jobs (a bulk enqueue, a worker's flush of finished
jobs). A job that cannot be moved -- a key of another type planted at its row or
its idempotency key -- is refused as an entry of the reply, before its first
write; it never aborts the call halfway with the others' writes half done. And
one call carries at most BATCH_MAX jobs and about BATCH_BYTES of payloads, so no
batch blocks the server for long.
"""

from __future__ import annotations

import pytest

from echomq_django.engine.errors import CorruptKey
from echomq_django.engine.jobs import BATCH_BYTES, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.new_job import idempotency_digest

from .conftest import QUEUE, WORKER, assert_one_place, enqueue_n, members, new, row


def _evalsha_calls(client) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def test_a_planted_idempotency_key_refuses_only_its_job(jobs):
    keys = QueueKeys.of(QUEUE)
    digest = idempotency_digest("tests.task", "planted")
    jobs.connector.client.hset(keys.idempotency(digest), "not", "a string")
    batch = [new(idempotency_key="planted" if i == 2 else None) for i in range(5)]
    with pytest.raises(CorruptKey, match="holds a hash, not a string"):
        jobs.enqueue_many(QUEUE, batch)
    stored = [job.id for i, job in enumerate(batch) if i != 2]
    assert members(jobs)["pending"] == stored
    assert row(jobs, batch[2].id) == {}
    assert jobs.stats(QUEUE).metrics["enqueued"] == 4
    assert jobs.connector.client.zcard(keys.wake) == 1  # the batch still woke a worker
    assert_one_place(jobs)


def test_a_row_replaced_by_a_string_refuses_only_its_completion(jobs):
    enqueue_n(jobs, 3)
    held = jobs.claim(QUEUE, WORKER, count=3).jobs
    jobs.connector.client.set(QueueKeys.of(QUEUE).job(held[1].id), "planted")
    replies = jobs.complete_many([(QUEUE, c.id, c.token, "1") for c in held])
    assert isinstance(replies[0], int) and isinstance(replies[2], int)
    assert isinstance(replies[1], CorruptKey) and "holds a string, not a hash" in str(replies[1])
    assert sorted(members(jobs)["completed"]) == sorted([held[0].id, held[2].id])
    assert members(jobs)["active"] == [held[1].id]
    assert jobs.stats(QUEUE).metrics["completed"] == 2


def test_a_batch_is_cut_by_bytes_as_well_as_by_count(standalone, jobs, redis_client):
    payload = '"' + "x" * (BATCH_BYTES // 3) + '"'
    jobs.enqueue(QUEUE, new())  # the connection and the script are ready
    before = _evalsha_calls(redis_client)
    ids = [e.id for e in jobs.enqueue_many(QUEUE, [new(payload) for _ in range(3)])]
    assert _evalsha_calls(redis_client) - before == 2  # 2 + 1: no call over ~1 MiB
    assert members(jobs)["pending"][1:] == ids
    held = jobs.claim(QUEUE, WORKER, count=4).jobs
    before = _evalsha_calls(redis_client)
    jobs.complete_many([(QUEUE, c.id, c.token, payload) for c in held])
    assert _evalsha_calls(redis_client) - before == 2
    assert len(members(jobs)["completed"]) == 4


def test_a_claim_reply_is_bounded_by_bytes(jobs):
    """250 jobs of 400 kB each would be a ~100 MiB reply: the claim stops at 8 MiB (the
    first job over it included), the rest stay pending in their order."""
    payload = "x" * 400_000
    ids = [jobs.enqueue(QUEUE, NewJob(payload=payload)).id for _ in range(40)]
    first = jobs.claim(QUEUE, WORKER, count=250).jobs
    assert len(first) == 21  # 21 x 400 kB >= 8 MiB
    assert [c.id for c in first] == ids[:21]
    rest = jobs.claim(QUEUE, WORKER, count=250).jobs
    assert [c.id for c in rest] == ids[21:]
