"""A server at maxmemory with noeviction: enqueue is refused whole, processing goes on.

What the engine does, found here and kept true by these tests:

* ``enqueue`` raises ``ServerOutOfMemory`` and writes nothing (keyspace dump
  unchanged), with or without an idempotency key, alone or pipelined. A
  flagless script is refused at its first write that may grow memory, and every
  write of enqueue comes after its reads, so the refusal lands before any write.
* ``claim``, ``complete``, ``retry``, ``release`` and ``reap`` keep working: each
  starts by removing the job from a set (ZPOPMIN / ZREM, which never grow
  memory), and once a script has written, the server lets it finish. Work
  already queued drains; no job is stuck or run twice because of OOM.
* ``extend`` carries ``#!lua flags=allow-oom`` (it only overwrites): before that
  flag it was refused, and long jobs lost their leases under OOM.
* ``trim`` (purging finished rows) works under OOM and is how memory comes back;
  then enqueue works again.
"""

from __future__ import annotations

import time

import pytest
import redis

from echomq_django.devserver import EmbeddedServer
from echomq_django.engine.connector import Connector
from echomq_django.engine.errors import ServerOutOfMemory
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.worker import Success, Worker
from tests.chaos import snapshot

Q = "oomq"
ERROR = '{"exception_class_path": "builtins.ValueError", "traceback": "boom"}'


@pytest.fixture
def full(server):
    """A server of our own at its memory limit: (jobs, raw client, jobs enqueued)."""
    own = EmbeddedServer(
        binary=server.binary, extra_args=["--maxmemory", "3mb", "--maxmemory-policy", "noeviction"]
    ).start()
    jobs = Jobs(Connector.from_url(own.url))
    raw = redis.Redis.from_url(own.url)
    n = 0
    with pytest.raises(ServerOutOfMemory, match="maxmemory"):
        while n < 10_000:
            jobs.enqueue(Q, NewJob(payload="x" * 2000))
            n += 1
    yield jobs, raw, n
    raw.close()
    jobs.connector.close()
    own.stop()


def _refused_whole(raw: redis.Redis, call) -> None:
    before = snapshot.dump(raw)
    with pytest.raises(ServerOutOfMemory):
        call()
    assert snapshot.dump(raw) == before


def test_enqueue_is_refused_with_a_typed_error_and_writes_nothing(full):
    jobs, raw, n = full
    assert n > 100  # the limit was reached by real jobs, not at the first call
    _refused_whole(raw, lambda: jobs.enqueue(Q, NewJob(payload="{}")))
    _refused_whole(raw, lambda: jobs.enqueue(Q, NewJob(payload="{}", idempotency_key="k1")))
    _refused_whole(raw, lambda: jobs.enqueue(Q, NewJob(payload="{}", due_ms=2**41)))
    _refused_whole(raw, lambda: jobs.enqueue_many(Q, [NewJob(payload="{}") for _ in range(5)]))
    assert jobs.stats(Q).counts["pending"] == n
    assert not snapshot.places(raw, Q)


def test_leased_processing_goes_on_under_oom(full):
    jobs, raw, n = full
    claimed = jobs.claim(Q, "w1", count=6, lease_ms=60_000).jobs
    assert len(claimed) == 6
    done, failed, extended, released = claimed[:2], claimed[2], claimed[3], claimed[4]
    for c in done:
        jobs.complete(Q, c.id, c.token, '"ok"')
    assert jobs.retry(Q, failed.id, failed.token, error=ERROR, summary="boom").state == "pending"
    assert jobs.extend(Q, extended.id, extended.token, 90_000) > 0
    jobs.release(Q, released.id, released.token)

    lost = jobs.claim(Q, "w2", count=1, lease_ms=1).jobs[0]
    time.sleep(0.01)
    assert jobs.reap(Q).moved == 1
    assert jobs.get(Q, lost.id).state == "pending"

    counts = jobs.stats(Q).counts
    assert counts == {"pending": n - 4, "scheduled": 0, "active": 2, "completed": 2, "dead": 0}
    assert not snapshot.places(raw, Q)
    with pytest.raises(ServerOutOfMemory):  # still full: only new work is refused
        jobs.enqueue(Q, NewJob(payload="{}"))


def test_the_worker_drains_a_full_server(full):
    """The real worker, on a server that refuses every new job, finishes all the old ones."""
    jobs, raw, n = full
    worker = Worker(jobs, [Q], lambda claimed: Success('"done"'), concurrency=4, burst=True)
    stats = worker.run()
    assert stats.completed == n and stats.stale == 0
    assert jobs.stats(Q).counts["completed"] == n
    assert not snapshot.places(raw, Q)


def test_enqueue_works_again_once_memory_is_freed(full):
    jobs, raw, n = full
    left = n
    while left:
        batch = jobs.claim(Q, "w1", count=200, lease_ms=60_000).jobs
        jobs.complete_many([(Q, c.id, c.token, "null") for c in batch])
        left -= len(batch)
    assert jobs.stats(Q).counts["completed"] == n
    assert jobs.trim(Q, "completed", purge=True).moved == n
    job = jobs.enqueue(Q, NewJob(payload="y" * 2000))
    assert jobs.get(Q, job.id).payload == "y" * 2000
    assert not snapshot.places(raw, Q)
