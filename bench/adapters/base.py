"""The adapter interface every measured library implements.

One module per library under ``bench/adapters/``, each exposing ``ADAPTER``,
an instance of a subclass of :class:`Adapter`. The runner calls, for each
repetition and each library in turn (interleaved):

    setup(url)                  connect clients; not timed
    enqueue_one(n) -> s         enqueue n no-op jobs one call at a time
    enqueue_bulk(n, batch) -> s enqueue n jobs with the library's bulk API
    prefill(n)                  put n no-op jobs in the queue (not timed)
    run_workers(n, procs, variant) -> jobs/s
                                start `procs` worker processes on the n
                                pre-enqueued jobs; return
                                Tally.wait_finished(...): jobs per second
                                from the moment all processes run to the
                                n-th task's end
    pickup_latency(k) -> [ms]   k jobs, one at a time, to one idle worker
    first_job_seconds() -> s    one job waiting; spawn one worker process;
                                seconds from the spawn to that job's end
    teardown()                  close clients, stop anything left

Optional (the runner skips an adapter without them):

    aenqueue_one(n) -> s        n jobs, one ``await task.aenqueue()`` at a time
    run_supervised(n, children, variant) -> jobs/s
                                one worker command that runs ``children``
                                task processes under its own supervisor

The server is FLUSHALLed (and CONFIG RESETSTAT) before every call. Every
no-op task does the same bookkeeping (bench/tasks/probe.py): it writes a byte
to the harness's FIFO (``common.Tally``), the first task of each process its
start time too; the latency task RPUSHes ms-since-enqueue to bench:lat. ``run_workers`` must stop its
processes before returning.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from importlib import metadata
from typing import Any

from bench import common


class Skip(Exception):
    """Raised by an adapter (or returned by ``available``) to skip a library."""


class Adapter:
    key = "base"  # short id used on the command line (--libs)
    name = "Base"  # column title
    variants: tuple = (None,)  # run_workers variants; the best median is reported
    bulk_api = ""  # what "bulk" means for this library (footnote)
    notes: tuple[str, ...] = ()  # fairness notes printed under the table
    count_variant = None  # variant used in the command-counting pass

    url: str = ""

    def available(self) -> str | None:
        """None if the library can be measured here, else why not."""
        return None

    def version(self) -> str:
        return ""

    def setup(self, url: str) -> None:
        """Connect. Subclasses call super().setup(url) first."""
        self.url = url
        self.harness = common.client(url)  # the harness's own waits and reads

    def teardown(self) -> None:
        pass

    def enqueue_one(self, n: int) -> float:
        raise NotImplementedError

    def enqueue_bulk(self, n: int, batch: int) -> float:
        raise NotImplementedError

    def prefill(self, n: int) -> None:
        self.enqueue_bulk(n, 1000)

    def run_workers(self, n: int, n_procs: int, variant=None) -> float:
        raise NotImplementedError

    def pickup_latency(self, k: int) -> list[float]:
        raise NotImplementedError

    def variant_label(self, variant) -> str:
        return "" if variant is None else str(variant)

    def spawn_worker(self, i: int, tally: common.Tally | None, latency: bool) -> subprocess.Popen:
        """Start worker process ``i`` (its best/default settings) reporting to ``tally``."""
        raise NotImplementedError

    def first_job_seconds(self) -> float:
        """One job waiting, one worker spawned: seconds from the spawn to the job's end.

        What ``--burst``, autoscaling and a test suite feel: interpreter start-up,
        imports, framework set-up, the worker's own start and its first claim.
        """
        self.prefill(1)
        with common.Tally() as tally:
            started = time.time()
            procs = [self.spawn_worker(0, tally, latency=False)]
            try:
                return tally.wait_first(procs, timeout=60.0) - started
            finally:
                common.stop(procs)


def dist_version(*names: str) -> str:
    out = []
    for n in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out.append(f"{n} {metadata.version(n)}")
    return ", ".join(out)


class PythonPeer(Adapter):
    """A Python library whose workers are separate CLI processes.

    Subclasses provide ``worker_argv(i, latency)``, ``_enqueue_noop()``,
    ``_enqueue_bulk(batch)`` and ``_enqueue_lat(ts_ms)``.
    """

    module = ""  # importable name used by available()
    # argv(children, variant) of one worker command running `children` task processes
    # under its own supervisor (EchoMQ's --processes N, threadmill's -w N), each with
    # the variant's concurrency; None: no such mode.
    supervisor_argv: Any = None

    def available(self):
        try:
            __import__(self.module)
        except ImportError as e:
            return f"not installed ({e})"
        return None

    def worker_argv(self, i: int, latency: bool) -> list[str]:
        raise NotImplementedError

    def enqueue_one(self, n):
        f = self._enqueue_noop
        t = time.perf_counter()
        for _ in range(n):
            f()
        return time.perf_counter() - t

    def enqueue_bulk(self, n, batch):
        t = time.perf_counter()
        left = n
        while left > 0:
            b = min(batch, left)
            self._enqueue_bulk(b)
            left -= b
        return time.perf_counter() - t

    def spawn_worker(self, i, tally, latency):
        env = common.worker_env(self.url, tally)
        name = f"{self.key}-lat" if latency else f"{self.key}-w{i}"
        return common.spawn(self.worker_argv(i, latency), env, name)

    def run_workers(self, n, n_procs, variant=None):
        with common.Tally() as tally:
            procs = [self.spawn_worker(i, tally, latency=False) for i in range(n_procs)]
            try:
                return tally.wait_finished(n, procs, timeout=max(120.0, n / 100.0))
            finally:
                common.stop(procs)

    def run_supervised(self, n: int, children: int, variant: Any = None) -> float:
        """Jobs/s of one supervised worker command with ``children`` task processes."""
        with common.Tally() as tally:
            env = common.worker_env(self.url, tally)
            argv = self.supervisor_argv(children, variant)
            procs = [common.spawn(argv, env, f"{self.key}-sup")]
            try:
                return tally.wait_finished(
                    n, procs, timeout=max(120.0, n / 100.0), runners=children
                )
            finally:
                common.stop(procs)

    def pickup_latency(self, k):
        procs = [self.spawn_worker(0, None, latency=True)]
        try:
            return common.pickup_loop(self.harness, self._enqueue_lat, k)
        finally:
            common.stop(procs)
