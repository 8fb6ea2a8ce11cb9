"""Invariants 2 and 6 over queues on all three masters at once.

tests/engine runs on the cluster with its one queue (one node); here workers and
reapers race over three queues, one per master, sharing one Connector: claims,
completions (pipelined across nodes), retries, releases, zombies past their lease.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

from echomq_django.engine.errors import StaleToken
from tests.engine.conftest import assert_one_place, enqueue_n, error_json
from tests.support.cluster import SPREAD

N_PER_QUEUE = 120


def test_nothing_lost_and_one_place_on_every_node(jobs):
    for queue in SPREAD:
        enqueue_n(jobs, N_PER_QUEUE, queue, max_attempts=3)
    done = threading.Event()
    completions: Counter = Counter()
    lock = threading.Lock()

    def worker(i: int) -> None:
        rng = random.Random(20261129 + i)
        while not done.is_set():
            batch = [c for q in SPREAD for c in jobs.claim(q, f"w{i}", count=2, lease_ms=40).jobs]
            if not batch:
                time.sleep(0.002)
            finishing = []
            for c in batch:
                roll = rng.random()
                try:
                    if roll < 0.08:
                        time.sleep(0.05)  # past its lease: a zombie
                    if roll < 0.6:
                        finishing.append(c)
                    elif roll < 0.85:
                        jobs.retry(c.queue, c.id, c.token, error=error_json(), summary="x")
                    else:
                        jobs.release(c.queue, c.id, c.token)
                except StaleToken:
                    pass
            replies = jobs.complete_many([(c.queue, c.id, c.token, "null") for c in finishing])
            with lock:
                completions.update(
                    c.id for c, r in zip(finishing, replies) if not isinstance(r, Exception)
                )

    def reaper() -> None:
        while not done.is_set():
            for queue in SPREAD:
                jobs.reap(queue, limit=5)
            time.sleep(0.005)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    threads.append(threading.Thread(target=reaper))
    for t in threads:
        t.start()

    def finished() -> bool:
        return all(
            (c := jobs.stats(q).counts)["completed"] + c["dead"] == N_PER_QUEUE for q in SPREAD
        )

    deadline = time.monotonic() + 30
    while not finished() and time.monotonic() < deadline:
        time.sleep(0.02)
    done.set()
    for t in threads:
        t.join()

    assert finished()
    completed = reaped = 0
    for queue in SPREAD:
        assert len(assert_one_place(jobs, queue)) == N_PER_QUEUE
        stats = jobs.stats(queue)
        assert stats.metrics["enqueued"] == N_PER_QUEUE
        completed += stats.counts["completed"]
        reaped += stats.metrics.get("reaped", 0) + stats.metrics.get("reaped_dead", 0)
    assert reaped > 0, "no lease ever expired"
    assert sum(completions.values()) == completed
    assert max(completions.values()) == 1  # no job completed twice
