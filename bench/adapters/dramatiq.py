"""Dramatiq on its Redis broker (default 8 worker threads per process)."""

import os

from bench.adapters.base import PythonPeer, dist_version
from bench.common import python_exe

THREADS = 8  # dramatiq's default


class DramatiqAdapter(PythonPeer):
    key = "dramatiq"
    name = "Dramatiq"
    module = "dramatiq"
    bulk_api = "none: group().run() enqueues one message at a time"
    notes = (
        f"Dramatiq: `dramatiq --processes 1 --threads {THREADS}` per worker process "
        "(its defaults for threads); an idle consumer polls with exponential backoff "
        "up to the worker timeout (1 s), which is what its pick-up latency shows.",
    )

    def version(self):
        return dist_version("dramatiq")

    def setup(self, url):
        super().setup(url)
        os.environ["BENCH_URL"] = url
        import dramatiq

        from bench.tasks import dramatiq_tasks

        self._dramatiq = dramatiq
        self._tasks = dramatiq_tasks

    def teardown(self):
        self._tasks.broker.client.close()

    def _enqueue_noop(self):
        self._tasks.noop.send()

    def _enqueue_bulk(self, b):
        m = self._tasks.noop.message
        self._dramatiq.group([m() for _ in range(b)]).run()

    def prefill(self, n):
        self.enqueue_one(n)  # group().run() is a loop of single enqueues anyway

    def _enqueue_lat(self, ts_ms):
        self._tasks.lat.send(ts_ms)

    def worker_argv(self, i, latency):
        return [
            python_exe(),
            "-m",
            "dramatiq",
            "bench.tasks.dramatiq_tasks",
            "--processes",
            "1",
            "--threads",
            str(THREADS),
            "--queues",
            "bench",
        ]


ADAPTER = DramatiqAdapter()
