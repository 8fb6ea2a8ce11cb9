"""One worker, three queues: a single Valkey against a 3-master Valkey Cluster.

    python -m bench.cluster [--jobs 100] [--throughput 20000]

Starts its own servers (EmbeddedServer, EmbeddedCluster) and prints, for each:

* pick-up latency of an idle worker serving three queues (on the cluster, one
  per master: it waits with one blocking read per queue), an enqueue into each
  queue in turn -> the handler starts (p50/p99);
* no-op throughput of one burst worker (concurrency 4) over the three queues.

Nothing here is asserted: the numbers are for people. The behaviour is tested in
tests/scaleout/test_cluster_worker.py.
"""

from __future__ import annotations

import argparse
import threading
import time

from bench.idle import percentile, wait_idle
from echomq_django.devserver import EmbeddedCluster, EmbeddedServer
from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Claimed, Jobs, NewJob
from echomq_django.engine.worker import Success, Worker

QUEUES = ("emails", "default", "billing")  # one per master of a 3-master cluster


def pickup_latency(jobs: Jobs, n: int) -> list[float]:
    """ms from enqueue to handler start, each job into the next queue of an idle worker."""
    started: dict[str, float] = {}
    done = threading.Event()

    def handler(claimed: Claimed) -> Success:
        started[claimed.id] = time.perf_counter()
        done.set()
        return Success()

    worker = Worker(jobs, list(QUEUES), handler, idle_block_s=5)
    threading.Thread(target=worker.run, daemon=True).start()
    latencies = []
    for i in range(n):
        wait_idle(worker)
        time.sleep(0.002)  # idle is set just before the blocking reads go out
        done.clear()
        t0 = time.perf_counter()
        job_id = jobs.enqueue(QUEUES[i % len(QUEUES)], NewJob(payload="{}")).id
        done.wait(10)
        latencies.append((started[job_id] - t0) * 1000)
    worker.stop()
    return latencies


def throughput(jobs: Jobs, n: int, concurrency: int = 4) -> float:
    """No-op jobs per second for one burst worker over the three queues."""
    for queue in QUEUES:
        for i in range(0, n // len(QUEUES), 1000):
            count = min(1000, n // len(QUEUES) - i)
            jobs.enqueue_many(queue, [NewJob(payload="{}") for _ in range(count)])
    worker = Worker(jobs, list(QUEUES), lambda c: Success(), concurrency=concurrency, burst=True)
    t0 = time.perf_counter()
    stats = worker.run()
    return stats.completed / (time.perf_counter() - t0)


def report(name: str, url: str, args: argparse.Namespace) -> None:
    jobs = Jobs(Connector.from_url(url))
    lat = pickup_latency(jobs, args.jobs)
    print(
        f"{name}: idle pick-up over 3 queues ({args.jobs} jobs): p50 {percentile(lat, 50):.2f} ms,"
        f" p99 {percentile(lat, 99):.2f} ms, max {max(lat):.2f} ms"
    )
    if args.throughput:
        per_s = throughput(jobs, args.throughput)
        print(f"{name}: no-op throughput, 3 queues, concurrency 4: {per_s:,.0f} jobs/s")
    jobs.connector.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100, help="jobs in the latency series")
    parser.add_argument("--throughput", type=int, default=20_000, help="no-op jobs (0: skip)")
    args = parser.parse_args()
    with EmbeddedServer() as server:
        report(f"{server.product} {server.version}", server.url, args)
    with EmbeddedCluster(3) as cluster:
        node = cluster.nodes[0]
        report("3-master cluster", f"redis+cluster://{node.host}:{node.port}/0", args)


if __name__ == "__main__":
    main()
