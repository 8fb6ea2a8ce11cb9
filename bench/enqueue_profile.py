"""Where one one-by-one ``task.enqueue()`` spends its time (issue 23).

``python -m bench.enqueue_profile [--n 20000] [--reps 3] [--profile]``

On a fresh embedded Valkey (never the machine's shared server), interleaved
repetitions of, per call:

- ``raw``: redis-py ``evalsha`` of ``return 1`` (the bench's raw limit);
- ``connector``: the engine's own dispatch (``Connector.run``) of ``return 1``;
- ``engine``: ``Jobs.enqueue`` of a ready ``NewJob`` (validation, arguments, the
  enqueue script);
- ``enqueue``: ``task.enqueue()`` through the Django backend (what a view does);
- ``aenqueue``: ``await task.aenqueue()`` in one event loop.

Printed: µs per call (median), calls/s, ``enqueue`` as a share of ``raw``, and the
server's side of one enqueue from ``INFO commandstats`` (commands per job, µs the
server spent per job). ``--profile`` runs pyinstrument over the ``enqueue`` loop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable

from bench import common, server
from bench.adapters.django_tasks import django_setup


def per_call_us(fn: Callable[[], object], n: int) -> tuple[float, float]:
    """(wall µs, this process's CPU µs) per call."""
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n * 1e6, (time.process_time() - cpu) / n * 1e6


def aenqueue_us(task: object, n: int) -> tuple[float, float]:
    async def go() -> tuple[float, float]:
        await task.aenqueue()  # type: ignore[attr-defined]
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            await task.aenqueue()  # type: ignore[attr-defined]
        return (time.perf_counter() - started) / n * 1e6, (time.process_time() - cpu) / n * 1e6

    return asyncio.run(go())


def server_side(r: object, fn: Callable[[], object], n: int) -> tuple[dict[str, int], float]:
    """Commands per job by name, and the server's µs per job (commandstats' usec)."""
    common.reset(r)
    for _ in range(n):
        fn()
    stats = r.info("commandstats")  # type: ignore[attr-defined]
    calls: dict[str, int] = {}
    usec = 0.0
    for name, row in stats.items():
        command = name.removeprefix("cmdstat_")
        if command in ("info", "config|resetstat", "config", "flushall"):
            continue
        calls[command] = round(row["calls"] / n, 2)
        if command in ("evalsha", "eval"):
            usec += row["usec"]
    return calls, usec / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    opts = parser.parse_args()

    srv = server.start()
    try:
        os.environ["BENCH_URL"] = srv.url
        django_setup()
        from bench.tasks import echomq_tasks
        from echomq_django import conf
        from echomq_django.engine.jobs import NewJob
        from echomq_django.engine.script import Script

        conf.reset()
        jobs = conf.get_jobs()
        r = common.client(srv.url)
        sha = r.script_load("return 1")
        noop_script = Script("noop", "return 1")
        jobs.connector.load(noop_script)
        task = echomq_tasks.noop
        payload = '{"task":"bench.tasks.echomq_tasks.noop","args":[],"kwargs":{}}'

        def engine_enqueue() -> None:
            jobs.enqueue("bench", NewJob(payload=payload, task="bench.tasks.echomq_tasks.noop"))

        paths: dict[str, Callable[[], tuple[float, float]]] = {
            "raw": lambda: per_call_us(lambda: r.evalsha(sha, 0), opts.n),
            "connector": lambda: per_call_us(lambda: jobs.connector.run(noop_script, []), opts.n),
            "engine": lambda: per_call_us(engine_enqueue, opts.n),
            "enqueue": lambda: per_call_us(task.enqueue, opts.n),
            "aenqueue": lambda: aenqueue_us(task, opts.n),
        }
        task.enqueue()
        engine_enqueue()
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in paths}
        for _ in range(opts.reps):
            for name, run in paths.items():
                common.reset(r)
                samples[name].append(run())
        raw = statistics.median(w for w, _ in samples["raw"])
        print(
            f"{'path':<10} {'µs/call':>8} {'cpu µs':>7} {'calls/s':>8} {'raw/x':>6}   wall samples"
        )
        for name, values in samples.items():
            us = statistics.median(w for w, _ in values)
            cpu = statistics.median(c for _, c in values)
            shown = " ".join(f"{w:.1f}" for w, _ in values)
            print(f"{name:<10} {us:8.1f} {cpu:7.1f} {1e6 / us:8.0f} {raw / us:6.2f}   {shown}")
        _, raw_usec = server_side(r, lambda: r.evalsha(sha, 0), 2_000)
        calls, usec = server_side(r, task.enqueue, 2_000)
        print(f"server per task.enqueue(): {usec:.1f} µs in EVALSHA (return 1: {raw_usec:.1f} µs)")
        print(f"commands per task.enqueue(): {calls}")
        if opts.profile:  # under py-spy: `py-spy record -o x.txt -f raw -- python -m ...`
            common.reset(r)
            for _ in range(opts.n):
                task.enqueue()
        r.close()
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
