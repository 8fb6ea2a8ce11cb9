"""Worker-layer fixtures: engine workers in threads, and worker/reaper subprocesses.

In-process workers run ``Worker.run`` in a thread and are stopped at teardown.
Subprocesses (see ``procs.py``) are real processes that tests kill with SIGKILL,
SIGTERM or SIGSTOP; every one still alive at teardown is killed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from echomq_django.engine.jobs import Jobs
from echomq_django.engine.worker import Worker, WorkerStats
from tests.worker import procs


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, step: float = 0.01):
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        time.sleep(step)


class RunningWorker:
    """A Worker running in a thread; ``stats()`` joins it."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._stats: WorkerStats | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self._stats = self.worker.run()

    def stop(self, timeout: float = 10.0) -> WorkerStats:
        """Stop the worker and wait for its stats."""
        self.worker.stop()
        return self.stats(timeout)

    def stats(self, timeout: float = 15.0) -> WorkerStats:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the worker did not return"
        assert self._stats is not None
        return self._stats


@pytest.fixture
def jobs(connector) -> Jobs:
    return Jobs(connector)


@pytest.fixture
def start_worker(jobs) -> Iterator[Callable[..., RunningWorker]]:
    """start_worker(handler, queues=["q"], **Worker options) -> RunningWorker."""
    running: list[RunningWorker] = []

    def start(handler, queues=("q",), **options) -> RunningWorker:
        options.setdefault("lease_ms", 1000)
        options.setdefault("grace_s", 5.0)
        rw = RunningWorker(Worker(jobs, list(queues), handler, **options))
        running.append(rw)
        return rw

    yield start
    for rw in running:
        rw.worker.stop()
    for rw in running:
        rw.thread.join(10)


@pytest.fixture
def spawn(tmp_path) -> Iterator[Callable[..., procs.Proc]]:
    """spawn("worker" | "reaper", url, *args) -> procs.Proc, killed at teardown if alive."""
    started: list[procs.Proc] = []

    def start(kind: str, url: str, *args: str, **env: str) -> procs.Proc:
        proc = procs.start(kind, url, *args, log_dir=tmp_path, **env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


@pytest.fixture
def valkey_url(valkey_server) -> str:
    """The session Valkey, flushed: process tests run on one server kind to stay fast."""
    valkey_server.command("FLUSHALL")
    return valkey_server.url


@pytest.fixture
def valkey_jobs(valkey_url) -> Iterator[Jobs]:
    from echomq_django.engine.connector import Connector

    connector = Connector.from_url(valkey_url)
    yield Jobs(connector)
    connector.close()
