"""RQ: SimpleWorker (no fork per job), default result TTL."""

import os

from bench.adapters.base import PythonPeer, dist_version
from bench.common import python_exe


class RQAdapter(PythonPeer):
    key = "rq"
    name = "RQ"
    module = "rq"
    bulk_api = "Queue.enqueue_many (one pipeline per batch)"
    notes = (
        "RQ: `rq worker --worker-class rq.worker.SimpleWorker` (runs jobs in the worker "
        "process; the default Worker forks per job), `--burst` for throughput; default "
        "result TTL (results are stored).",
    )

    def version(self):
        return dist_version("rq")

    def setup(self, url):
        super().setup(url)
        os.environ["BENCH_URL"] = url
        import redis
        from rq import Queue

        from bench.tasks import rq_tasks

        self._tasks = rq_tasks
        self._Queue = Queue
        self.conn = redis.Redis.from_url(url)
        self.q = Queue("bench", connection=self.conn)

    def teardown(self):
        self.conn.close()

    def _enqueue_noop(self):
        self.q.enqueue(self._tasks.noop)

    def _enqueue_bulk(self, b):
        f = self._tasks.noop
        self.q.enqueue_many([self._Queue.prepare_data(f) for _ in range(b)])

    def _enqueue_lat(self, ts_ms):
        self.q.enqueue(self._tasks.lat, ts_ms)

    def worker_argv(self, i, latency):
        argv = [python_exe(), "-m", "rq.cli", "worker", "--worker-class", "rq.worker.SimpleWorker"]
        argv += ["-u", self.url, "-n", f"bench-{os.getpid()}-{i}-{int(latency)}", "-q"]
        if not latency:
            argv.append("--burst")
        return [*argv, "bench"]


ADAPTER = RQAdapter()
