"""Idle behaviour of the engine worker: pick-up latency, scheduled punctuality, command rate.

    python -m bench.idle [--jobs 200] [--idle-seconds 10] [--throughput 20000]

Starts its own Valkey (EmbeddedServer), runs one engine Worker in this process
(a thread, so the handler and the enqueuer share one clock), and prints:

* pick-up latency: an enqueue into an idle queue -> the handler starts (p50/p99);
* scheduled lateness: a job due at T -> the handler starts, minus T (p50/p99);
* the idle worker's command rate, from INFO commandstats over ``--idle-seconds``;
* no-op throughput with concurrency 1 and 4, and client round trips per job
  (script calls and pipelines counted on the connector).

Nothing here is asserted: the numbers are for people. Tests only check the
behaviour loosely (tests/worker/test_worker.py).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable

from bench.common import percentile
from echomq_django.devserver import EmbeddedServer
from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Claimed, Jobs, NewJob
from echomq_django.engine.worker import Success, Worker


def start(jobs: Jobs, queue: str, handler: Callable[[Claimed], Success], **options) -> Worker:
    worker = Worker(jobs, [queue], handler, **options)
    threading.Thread(target=worker.run, daemon=True).start()
    return worker


def wait_idle(worker: Worker, timeout: float = 10) -> None:
    """Until the worker is blocked on the server (its fetcher's blocking read)."""
    deadline = time.monotonic() + timeout
    while not worker.idle:
        if time.monotonic() > deadline:
            raise TimeoutError("the worker never went idle")
        time.sleep(0.001)


def pickup_latency(jobs: Jobs, n: int) -> list[float]:
    """ms from enqueue (client) to handler start, each job sent into an idle queue."""
    started: dict[str, float] = {}
    done = threading.Event()

    def handler(claimed: Claimed) -> Success:
        started[claimed.id] = time.perf_counter()
        done.set()
        return Success()

    worker = start(jobs, "idle", handler, idle_block_s=5)
    latencies = []
    for _ in range(n):
        wait_idle(worker)
        done.clear()
        t0 = time.perf_counter()
        job_id = jobs.enqueue("idle", NewJob(payload="{}")).id
        done.wait(5)
        latencies.append((started[job_id] - t0) * 1000)
    worker.stop()
    return latencies


def scheduled_lateness(jobs: Jobs, n: int, ahead_ms: int = 150) -> list[float]:
    """ms between a scheduled job's due time and its handler's start (no reaper runs)."""
    started: dict[str, float] = {}
    done = threading.Event()

    def handler(claimed: Claimed) -> Success:
        started[claimed.id] = time.time() * 1000
        done.set()
        return Success()

    worker = start(jobs, "later", handler, idle_block_s=5)
    lateness = []
    for _ in range(n):
        wait_idle(worker)
        done.clear()
        due = int(time.time() * 1000) + ahead_ms
        job_id = jobs.enqueue("later", NewJob(payload="{}", due_ms=due)).id
        done.wait(5)
        lateness.append(started[job_id] - due)
    worker.stop()
    return lateness


def idle_command_rate(jobs: Jobs, seconds: float) -> tuple[float, dict[str, int]]:
    """Commands per second the server sees from one idle worker (INFO excluded)."""
    worker = start(jobs, "quiet", lambda c: Success(), idle_block_s=5)
    wait_idle(worker)
    client = jobs.connector.client
    client.config_resetstat()
    time.sleep(seconds)
    stats = client.info("commandstats")
    worker.stop()
    calls = {
        name.removeprefix("cmdstat_"): int(v["calls"])
        for name, v in stats.items()
        if name not in ("cmdstat_info", "cmdstat_config|resetstat", "cmdstat_config")
    }
    return sum(calls.values()) / seconds, calls


class RoundTrips:
    """Counts the connector's round trips (one per script call, one per pipeline)."""

    def __init__(self, connector: Connector) -> None:
        self.count = 0
        for name in ("run", "run_many"):
            original = getattr(connector, name)

            def counted(*args, _original=original, **kwargs):
                self.count += 1
                return _original(*args, **kwargs)

            setattr(connector, name, counted)


def throughput(url: str, n: int, concurrency: int) -> tuple[float, float]:
    """No-op jobs per second for one burst worker, and its round trips per job."""
    jobs = Jobs(Connector.from_url(url))
    jobs.connector.client.flushall()
    for i in range(0, n, 1000):
        jobs.enqueue_many("noop", [NewJob(payload="{}") for _ in range(min(1000, n - i))])
    trips = RoundTrips(jobs.connector)
    worker = Worker(jobs, ["noop"], lambda c: Success(), concurrency=concurrency, burst=True)
    t0 = time.perf_counter()
    stats = worker.run()
    elapsed = time.perf_counter() - t0
    assert stats.completed == n, stats
    jobs.connector.close()
    return n / elapsed, trips.count / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs per latency series")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--throughput", type=int, default=20_000, help="no-op jobs (0: skip)")
    args = parser.parse_args()
    with EmbeddedServer() as server:
        jobs = Jobs(Connector.from_url(server.url))
        print(f"server: {server.product} {server.version} at {server.url}")
        lat = pickup_latency(jobs, args.jobs)
        print(
            f"idle pick-up latency ({args.jobs} jobs): p50 {percentile(lat, 50):.2f} ms, "
            f"p99 {percentile(lat, 99):.2f} ms, max {max(lat):.2f} ms"
        )
        late = scheduled_lateness(jobs, max(10, args.jobs // 4))
        print(
            f"scheduled job lateness ({len(late)} jobs, no reaper): p50 "
            f"{percentile(late, 50):.1f} ms, p99 {percentile(late, 99):.1f} ms, "
            f"mean {statistics.fmean(late):.1f} ms"
        )
        rate, calls = idle_command_rate(jobs, args.idle_seconds)
        detail = ", ".join(f"{k} {v}" for k, v in sorted(calls.items()))
        print(f"idle worker: {rate:.2f} commands/s over {args.idle_seconds:g}s ({detail})")
        jobs.connector.close()
        if args.throughput:
            for concurrency in (1, 4):
                per_s, trips = throughput(server.url, args.throughput, concurrency)
                print(
                    f"no-op throughput, concurrency {concurrency}: {per_s:,.0f} jobs/s, "
                    f"{trips:.3f} round trips per job"
                )


if __name__ == "__main__":
    main()
