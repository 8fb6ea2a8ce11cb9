"""Celery, Redis broker, no result backend, solo pool (one process each)."""

import os

from bench.adapters.base import PythonPeer, dist_version
from bench.common import python_exe


class CeleryAdapter(PythonPeer):
    key = "celery"
    name = "Celery"
    module = "celery"
    bulk_api = "group(...).apply_async() (one publish per task over one producer)"
    notes = (
        "Celery: `celery worker --pool solo` (one process, one task at a time; 2 processes = "
        "2 solo workers), default prefetch multiplier (4), `--without-gossip --without-mingle "
        "--without-heartbeat`, no result backend (`task_ignore_result`).",
    )

    def version(self):
        return dist_version("celery", "kombu")

    def setup(self, url):
        super().setup(url)
        os.environ["BENCH_URL"] = url
        from celery import group

        from bench.tasks import celery_tasks

        self._group = group
        self._tasks = celery_tasks
        self._producer_cm = celery_tasks.app.producer_or_acquire()
        self.producer = self._producer_cm.__enter__()

    def teardown(self):
        self._producer_cm.__exit__(None, None, None)

    def _enqueue_noop(self):
        self._tasks.noop.apply_async(producer=self.producer)

    def _enqueue_bulk(self, b):
        s = self._tasks.noop.s
        self._group(s() for _ in range(b)).apply_async(producer=self.producer)

    def prefill(self, n):
        # Celery's group() is slower than one apply_async per task: use the latter.
        self.enqueue_one(n)

    def _enqueue_lat(self, ts_ms):
        self._tasks.lat.apply_async((ts_ms,), producer=self.producer)

    def worker_argv(self, i, latency):
        return [
            python_exe(),
            "-m",
            "celery",
            "-A",
            "bench.tasks.celery_tasks",
            "worker",
            "--pool",
            "solo",
            "--concurrency",
            "1",
            "-Q",
            "bench",
            "-n",
            f"w{i}-{os.getpid()}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel",
            "WARNING",
        ]


ADAPTER = CeleryAdapter()
