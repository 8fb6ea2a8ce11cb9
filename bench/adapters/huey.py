"""Huey on RedisHuey: blocking (BRPOP) storage, results off, one worker thread."""

import os

from bench.adapters.base import PythonPeer, dist_version
from bench.common import python_exe


class HueyAdapter(PythonPeer):
    key = "huey"
    name = "Huey"
    module = "huey"
    bulk_api = "none: task.map() enqueues one LPUSH at a time"
    notes = (
        "Huey: `huey_consumer -w 1 -k thread` per worker process (2 processes = 2 "
        "consumers), RedisHuey(blocking=True, results=False).",
    )

    def version(self):
        return dist_version("huey")

    def setup(self, url):
        super().setup(url)
        os.environ["BENCH_URL"] = url
        from bench.tasks import huey_tasks

        self._tasks = huey_tasks

    def teardown(self):
        self._tasks.huey.storage.conn.close()

    def _enqueue_noop(self):
        self._tasks.noop()

    def _enqueue_bulk(self, b):
        self._tasks.noop.map([() for _ in range(b)])

    def prefill(self, n):
        self.enqueue_one(n)  # map() is a loop of single enqueues anyway

    def _enqueue_lat(self, ts_ms):
        self._tasks.lat(ts_ms)

    def worker_argv(self, i, latency):
        return [
            python_exe(),
            "-m",
            "huey.bin.huey_consumer",
            "bench.tasks.huey_tasks.huey",
            "-w",
            "1",
            "-k",
            "thread",
            "-q",
        ]


ADAPTER = HueyAdapter()
