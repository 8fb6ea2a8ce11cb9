"""The engine worker's idle wait on a cluster: one blocking read per queue, given back when busy.

A BZPOPMIN over the wake keys of queues in different slots is a CROSSSLOT error,
so on a cluster the worker blocks per queue (``waiting.QueueWaiters``). These
tests use ``idle_block_s=5``: a wake-up that went missing would show as a
pick-up of seconds (the fetcher's own timeout), not milliseconds.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.registry import list_workers
from echomq_django.engine.worker import Success, Worker
from tests.support import servers
from tests.support.cluster import SPREAD, blocked_clients, move_slot, node_of, slot_of
from tests.support.running import RunningWorker
from tests.support.waiting import wait_until

IDLE_BLOCK_S = 5.0
# Woken, not polled: a missed wake-up shows as IDLE_BLOCK_S. The margin is for a busy
# 2-core machine running a 3-node cluster beside the worker (CI once saw 0.502 s).
PROMPT_S = 1.0


class Recorder:
    """A handler that notes when each job ran, and sleeps on payload ``"slow"``."""

    def __init__(self) -> None:
        self.ran: dict[str, tuple[float, str]] = {}  # job id -> (monotonic time, worker ids)
        self.lock = threading.Lock()

    def __call__(self, claimed):
        with self.lock:
            self.ran[claimed.id] = (time.monotonic(), claimed.job.worker_ids[-1])
        if claimed.job.payload == '"slow"':
            time.sleep(1.5)
        return Success()

    def wait_for(self, job_id: str, timeout: float = 10.0) -> tuple[float, str]:
        return wait_until(lambda: self.ran.get(job_id), timeout)


@pytest.fixture
def two_masters():
    """A 2-master cluster of this test's own: resharding changes its slot map."""
    cluster = servers.start_valkey_cluster(2)
    yield cluster
    cluster.stop()


@pytest.fixture
def start_worker_on():
    """start_worker_on(cluster, queues) -> (Jobs, Recorder); the worker stops at teardown."""
    started = []

    def start(cluster, queues):
        node = cluster.nodes[0]
        jobs = Jobs(Connector.from_url(f"redis+cluster://{node.host}:{node.port}/0"))
        recorder = Recorder()
        started.append(RunningWorker(Worker(jobs, queues, recorder, idle_block_s=30)))
        return jobs, recorder

    yield start
    for running in started:
        running.stop()


def test_the_queues_spread_over_the_three_masters(valkey_cluster):
    assert len({node_of(valkey_cluster, q).port for q in SPREAD}) == 3


def test_one_bzpopmin_cannot_span_queues_on_a_cluster(cluster_client):
    """Why the worker waits per queue: the server refuses one blocking read over slots
    (CROSSSLOT; redis-py keeps only the message)."""
    keys = [QueueKeys.of(q).wake for q in SPREAD[:2]]
    node = cluster_client.get_node_from_key(keys[0]).redis_connection
    with pytest.raises(redis.ResponseError, match="same slot"):
        node.bzpopmin(keys, 0.01)


def test_an_idle_worker_picks_up_from_every_queue_promptly(
    valkey_cluster, jobs, start_worker, record_property
):
    recorder = Recorder()
    worker = start_worker(recorder, SPREAD, idle_block_s=IDLE_BLOCK_S)
    nodes = [node_of(valkey_cluster, q) for q in SPREAD]
    latencies = {}
    for queue, node in reversed(list(zip(SPREAD, nodes))):  # third queue first
        wait_until(lambda n=node: blocked_clients(n) == 1)  # the worker idles on every node
        sent = time.monotonic()
        job_id = jobs.enqueue(queue, NewJob(payload="{}")).id
        ran_at, _ = recorder.wait_for(job_id)
        latencies[queue] = ran_at - sent
    record_property("pickup_ms", {q: round(s * 1000, 1) for q, s in latencies.items()})
    assert max(latencies.values()) < PROMPT_S, latencies
    # The worker registry (keys outside any queue slot, plain commands) works here too.
    (info,) = list_workers(jobs.connector)
    assert (info.id, info.queues) == (worker.worker.id, list(SPREAD))

    stopping = time.monotonic()
    stats = worker.stop()
    assert time.monotonic() - stopping < 2.0  # stop cuts the blocking reads
    assert stats.completed == len(SPREAD)
    wait_until(lambda: not [t for t in threading.enumerate() if t.name.startswith("echomq-wait")])
    assert all(blocked_clients(n) == 0 for n in nodes)


def test_a_busy_worker_gives_a_wake_up_back_to_an_idle_one(valkey_cluster, jobs, start_worker):
    """A busy worker's blocked read that takes a wake-up hands it on to an idle worker."""
    first, second = SPREAD[0], SPREAD[2]
    nodes = [node_of(valkey_cluster, q) for q in (first, second)]
    recorder = Recorder()
    start_worker(recorder, (first, second), name="busy", idle_block_s=IDLE_BLOCK_S)
    wait_until(lambda: all(blocked_clients(n) == 1 for n in nodes))
    start_worker(recorder, (first, second), name="idle", idle_block_s=IDLE_BLOCK_S)
    wait_until(lambda: all(blocked_clients(n) == 2 for n in nodes))

    slow = jobs.enqueue(first, NewJob(payload='"slow"')).id
    _, holder = recorder.wait_for(slow)
    assert holder == "busy"  # the first to block is served first
    # "busy" runs its one job; its read on the second queue is still blocked, first in line.
    sent = time.monotonic()
    quick = jobs.enqueue(second, NewJob(payload="{}")).id
    ran_at, holder = recorder.wait_for(quick)
    assert holder == "idle"
    assert ran_at - sent < PROMPT_S
    assert jobs.get(first, slow).state == "active"  # picked up while "busy" was still busy


def test_an_idle_worker_follows_its_queue_to_another_node(start_worker_on, two_masters):
    """Resharding moves a queue's slot while the worker waits on it: the server ends the
    blocked read (MOVED), the waiter learns the new owner and blocks there."""
    source, target = two_masters.nodes
    queue = "emails"  # slot 3728: the first master's
    jobs, recorder = start_worker_on(two_masters, [queue, "billing"])
    wait_until(lambda: blocked_clients(source) == 1 and blocked_clients(target) == 1)

    move_slot(source, target, slot_of(queue))
    wait_until(lambda: blocked_clients(target) == 2, timeout=3)  # long before idle_block_s
    sent = time.monotonic()
    job_id = jobs.enqueue(queue, NewJob(payload="{}")).id
    ran_at, _ = recorder.wait_for(job_id)
    assert ran_at - sent < PROMPT_S


def test_a_full_share_leaves_its_wake_ups_to_others_and_cuts_the_wait_when_it_frees(
    valkey_cluster, jobs, start_worker
):
    """``first:1 second:1``: while the slow job fills the first queue's share, the
    worker blocks on the second queue's node alone (a wake-up of the first is for
    another worker); when the slow job ends, the next one of the first starts at once,
    not when the idle wait times out."""
    first, second = SPREAD[0], SPREAD[2]
    nodes = [node_of(valkey_cluster, q) for q in (first, second)]
    recorder = Recorder()
    sizes = {first: 1, second: 1}
    start_worker(recorder, (first, second), sizes=sizes, concurrency=2, idle_block_s=IDLE_BLOCK_S)
    wait_until(lambda: all(blocked_clients(n) == 1 for n in nodes))
    slow = jobs.enqueue(first, NewJob(payload='"slow"')).id
    slow_at, _ = recorder.wait_for(slow)
    behind = jobs.enqueue(first, NewJob(payload="{}")).id
    wait_until(lambda: blocked_clients(nodes[0]) == 0 and blocked_clients(nodes[1]) == 1)
    sent = time.monotonic()
    beside = jobs.enqueue(second, NewJob(payload="{}")).id
    beside_at, _ = recorder.wait_for(beside)
    assert beside_at - sent < PROMPT_S and jobs.get(first, slow).state == "active"
    behind_at, _ = recorder.wait_for(behind)
    assert behind_at - slow_at < 1.5 + 2.0  # the slow job's sleep, then at once (< 5 s)
