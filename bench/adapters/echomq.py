"""EchoMQ through the path a user gets: the Django Tasks backend and ``runworker``.

Enqueue is ``task.enqueue()`` (one EVALSHA) and the backend's ``enqueue_many``
(one round trip per batch: a script call per 500 jobs); workers are ``runworker`` processes that
run each job as a Django Task. Item 6 times the engine itself: claim+complete
cycles with 10^4 vs 10^6 jobs pending, and one admin list page (``Jobs.page``,
50 rows, what the admin's list view reads) over a set of 10^6.
"""

from __future__ import annotations

import os
import time

from bench.adapters.base import PythonPeer, dist_version
from bench.adapters.django_tasks import aenqueue_loop, django_setup
from bench.common import python_exe

QUEUE = "bench"
FILL_BATCH = 1_000
CLAIM_BATCH = 100


class EchoMQAdapter(PythonPeer):
    key = "echomq"
    name = "EchoMQ"
    module = "echomq_django.engine.jobs"
    bulk_api = "EchoMQBackend.enqueue_many (one enqueue script call per 500 jobs, one round trip)"
    variants = (1, 4)  # runworker --concurrency; the best median is reported
    notes = (
        "EchoMQ: `python -m django runworker bench --concurrency C -v 0` per worker process "
        "(C = 1 or 4, best reported), Django Tasks backend end to end (payload encoding, "
        "task_started/task_finished signals, TaskResult, results kept for a day); the "
        "supervised row is one `runworker --processes 2 --concurrency C` (C per child).",
    )

    def version(self):
        return dist_version("echomq-django") or "working tree"

    def setup(self, url):
        super().setup(url)
        os.environ["BENCH_URL"] = url
        django_setup()  # bench.djsettings.harness: EchoMQ is its default backend
        from bench.tasks import echomq_tasks
        from echomq_django import conf

        conf.reset()  # BENCH_URL may differ from the last setup's
        self._tasks = echomq_tasks
        self._jobs = conf.get_jobs()
        self._backend = echomq_tasks.noop.get_backend()

    def teardown(self):
        from echomq_django import conf

        conf.reset()

    def _enqueue_noop(self):
        self._tasks.noop.enqueue()

    def aenqueue_one(self, n):
        return aenqueue_loop(self._tasks.noop, n)

    def _enqueue_bulk(self, b):
        self._backend.enqueue_many(self._tasks.noop, [((), {})] * b)

    def prefill(self, n):
        self.enqueue_bulk(n, FILL_BATCH)

    def _enqueue_lat(self, ts_ms):
        self._tasks.lat.enqueue(ts_ms)

    def variant_label(self, variant):
        return f"c={variant}"

    def run_workers(self, n, n_procs, variant=None):
        self._concurrency = variant or 1
        try:
            return super().run_workers(n, n_procs, variant)
        finally:
            self._concurrency = 1  # later spawns (first job, latency) get the default

    def supervisor_argv(self, children, variant=None):
        return [
            python_exe(), "-m", "django", "runworker", QUEUE,
            "--settings", "bench.echomq_settings", "--processes", str(children),
            "--concurrency", str(variant or 1), "--name", "bench-sup", "-v", "0",
        ]  # fmt: skip

    def worker_argv(self, i, latency):
        concurrency = 1 if latency else getattr(self, "_concurrency", 1)
        return [
            python_exe(), "-m", "django", "runworker", QUEUE,
            "--settings", "bench.echomq_settings",
            "--concurrency", str(concurrency), "--name", f"bench-{i}", "-v", "0",
        ]  # fmt: skip

    # -- item 6: how cost grows with work --------------------------------------------

    def claim_complete_rate(self, pending, n):
        """Jobs/s of claim (batches of 100) + a batched complete with ``pending`` waiting."""
        self.prefill(pending)
        jobs = self._jobs
        done = 0
        started = time.perf_counter()
        while done < n:
            claim = jobs.claim(QUEUE, "bench-scale", count=min(CLAIM_BATCH, n - done))
            jobs.complete_many([(QUEUE, c.id, c.token, "null") for c in claim.jobs])
            done += len(claim.jobs)
        return n / (time.perf_counter() - started)

    def admin_page_seconds(self, size):
        """One 50-row page from the middle of a set of ``size`` pending jobs."""
        self.prefill(size)
        self._jobs.page(QUEUE, "pending", offset=size // 2, count=50)  # warm the script cache
        started = time.perf_counter()
        self._jobs.page(QUEUE, "pending", offset=size // 2, count=50, newest_first=True)
        return time.perf_counter() - started


ADAPTER = EchoMQAdapter()
