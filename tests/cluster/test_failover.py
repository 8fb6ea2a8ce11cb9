"""A primary that crashes (SIGKILL) and a replica that takes over its slots.

The calls redis-py routes itself read the slot map again when a node fails; the
calls EchoMQ sends straight to a key's node (pipelines, the worker's wire, the idle
wait) must too, or a long-lived process keeps talking to the dead node for ever.
``CLUSTER FAILOVER TAKEOVER`` on the replica stands in for the cluster's own vote,
which needs more masters than the fixture has: the state after it is the same.
"""

from __future__ import annotations

import time

from echomq_django.engine.connector import Connector
from echomq_django.engine.errors import ServerUnavailable
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.worker import Success, Worker
from tests.support.cluster import SPREAD, info_field
from tests.support.running import RunningWorker
from tests.support.waiting import wait_until

QUEUE = SPREAD[0]


def crash_and_take_over(master, replica) -> None:
    wait_until(lambda: int(info_field(master, "replication", "master_repl_offset"))
               == int(info_field(replica, "replication", "slave_repl_offset")))  # fmt: skip
    master.kill()
    replica.command("CLUSTER", "FAILOVER", "TAKEOVER")
    wait_until(lambda: info_field(replica, "replication", "role") == "master")


def succeeds(call) -> bool:
    try:
        call()
    except ServerUnavailable:
        return False
    return True


def test_pipelined_calls_find_the_new_primary(cluster_with_replica):
    master, replica = cluster_with_replica
    jobs = Jobs(Connector.from_url(f"redis+cluster://{master.host}:{master.port}/0"))
    jobs.enqueue_many(QUEUE, [NewJob(payload="{}") for _ in range(3)])  # the map is cached
    held = jobs.claim(QUEUE, "w", count=3, lease_ms=60_000).jobs
    crash_and_take_over(master, replica)

    renew = [(QUEUE, c.id, c.token, 60_000) for c in held]
    wait_until(lambda: succeeds(lambda: jobs.extend_many(renew)), timeout=10)
    wait_until(
        lambda: succeeds(lambda: jobs.enqueue_many(QUEUE, [NewJob(payload="{}")])), timeout=10
    )
    assert not [r for r in jobs.extend_many(renew) if isinstance(r, Exception)]
    assert jobs.stats(QUEUE).counts["active"] == 3


def test_a_running_worker_goes_on_with_the_new_primary(cluster_with_replica):
    """Its claims, completions and renewals go over its wire, and its idle wait blocks on
    the queue's node: all of them on the new primary, without a restart."""
    master, replica = cluster_with_replica
    connector = Connector.from_url(f"redis+cluster://{master.host}:{master.port}/0")
    jobs = Jobs(connector)
    done: list[str] = []
    worker = Worker(
        jobs, [QUEUE], lambda c: done.append(c.id) or Success(), concurrency=2,
        idle_block_s=30, lease_ms=2000,
    )  # fmt: skip
    running = RunningWorker(worker)
    try:
        first = [e.id for e in jobs.enqueue_many(QUEUE, [NewJob(payload="{}") for _ in range(5)])]
        wait_until(lambda: set(first) <= set(done))
        wait_until(lambda: worker.idle)  # blocked on the master, 30 s to go
        crash_and_take_over(master, replica)

        fresh = Jobs(Connector.from_url(f"redis+cluster://{replica.host}:{replica.port}/0"))
        t0 = time.monotonic()
        later = [e.id for e in fresh.enqueue_many(QUEUE, [NewJob(payload="{}") for _ in range(5)])]
        wait_until(lambda: set(later) <= set(done), timeout=15)
        assert time.monotonic() - t0 < 10  # the worker's outage backoff, not its 30 s block
        wait_until(lambda: fresh.stats(QUEUE).counts["completed"] == 10, timeout=10)
    finally:
        running.stop()
