"""The worker and the reaper on a real 3-master Valkey Cluster (queues on different slots)."""

from __future__ import annotations

import time

from echomq_django.engine import registry
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.reaper import Reaper
from echomq_django.engine.worker import Success, Worker
from tests.support.running import RunningWorker
from tests.support.waiting import wait_until


def test_a_worker_serves_queues_on_several_slots_and_wakes_on_enqueue(cluster_connector):
    jobs = Jobs(cluster_connector)
    queues = ["alpha", "beta", "gamma"]
    for queue in queues:
        jobs.enqueue_many(queue, [NewJob(payload="{}") for _ in range(5)])
    started: dict[str, float] = {}
    worker = Worker(
        jobs, queues, lambda c: started.setdefault(c.id, time.monotonic()) and Success(),
        concurrency=2, idle_block_s=5,
    )  # fmt: skip
    rw = RunningWorker(worker)
    try:
        wait_until(lambda: all(jobs.stats(q).counts["completed"] == 5 for q in queues))
        wait_until(lambda: worker.idle)
        t0 = time.monotonic()
        job_id = jobs.enqueue("alpha", NewJob(payload="{}")).id  # the blocked-on queue
        wait_until(lambda: job_id in started, timeout=3)
        assert started[job_id] - t0 < 1.0
        assert [w.id for w in registry.list_workers(cluster_connector)] == [worker.id]
    finally:
        worker.stop()
    assert rw.stats().completed == 16


def test_the_reaper_sweeps_queues_on_every_node(cluster_connector):
    jobs = Jobs(cluster_connector)
    for queue in ("alpha", "beta", "gamma"):
        jobs.enqueue(queue, NewJob(payload="{}"))
        jobs.claim(queue, "gone", lease_ms=1)
    time.sleep(0.005)
    sweeps = Reaper(jobs).tick()
    assert {s.queue: s.reaped.moved for s in sweeps} == {"alpha": 1, "beta": 1, "gamma": 1}
