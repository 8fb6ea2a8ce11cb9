"""Limits on a real 3-master Valkey Cluster: each queue's gates live in its own slot."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.limits import RateLimit, concurrency_gate
from echomq_django.engine.worker import Success, Worker
from tests.support.running import RunningWorker
from tests.support.waiting import wait_until

QUEUES = ["alpha", "beta", "gamma"]  # three slots, on different nodes


def test_caps_and_rate_limits_hold_per_queue_on_the_cluster(cluster_connector):
    jobs = Jobs(cluster_connector)
    for queue in QUEUES:
        cap = concurrency_gate("t.capped", 1)
        jobs.enqueue_many(
            queue, [NewJob(payload="{}", task="t.capped", limits=cap) for _ in range(4)]
        )
        rate = RateLimit.parse("1/m").gate("t.rated")
        jobs.enqueue_many(
            queue, [NewJob(payload="{}", task="t.rated", limits=rate) for _ in range(3)]
        )
    lock, running, most = threading.Lock(), defaultdict(int), defaultdict(int)

    def handler(claimed):
        with lock:
            running[(claimed.queue, claimed.job.task)] += 1
            key = (claimed.queue, claimed.job.task)
            most[key] = max(most[key], running[key])
        time.sleep(0.05)
        with lock:
            running[(claimed.queue, claimed.job.task)] -= 1
        return Success()

    workers = [
        RunningWorker(Worker(jobs, QUEUES, handler, concurrency=4, idle_block_s=2))
        for _ in range(2)
    ]
    try:
        # Every capped job, one rated job per queue (one token a minute).
        wait_until(lambda: all(jobs.stats(q).counts["completed"] == 5 for q in QUEUES), 20)
    finally:
        for rw in workers:
            rw.worker.stop()
        for rw in workers:
            rw.stats()
    assert all(most[(q, "t.capped")] == 1 for q in QUEUES), dict(most)
    for queue in QUEUES:
        gates = {g.scope: g for g in jobs.limits(queue)}
        assert (gates["t.rated"].waiting, gates["t.capped"].level) == (2, 0)


def test_a_tasks_keyed_caps_are_counted_together_in_each_queues_slot(cluster_connector):
    jobs = Jobs(cluster_connector)
    for queue in QUEUES:
        batch = [
            NewJob(payload="{}", task="t.keyed", limits=concurrency_gate("t.keyed", 1, key))
            for key in ("a", "b", "c", "a")
        ]
        jobs.enqueue_many(queue, batch)
        assert len(jobs.claim(queue, "w1", count=10).jobs) == 3
        (family,) = jobs.limits(queue)
        assert (family.name, family.keys, family.level, family.waiting) == (
            "conc:t.keyed#*",
            3,
            3,
            1,
        )
