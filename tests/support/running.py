"""An engine Worker running in a thread of the test process, joined for its stats."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from echomq_django.engine.jobs import Jobs
from echomq_django.engine.worker import Worker, WorkerStats


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


@contextmanager
def worker_starter(
    jobs: Jobs, queues: Sequence[str], lease_ms: int
) -> Iterator[Callable[..., RunningWorker]]:
    """``start(handler, queues=..., **Worker options)`` for a test; every worker it
    started is stopped and joined when the test ends (the ``start_worker`` fixtures)."""
    running: list[RunningWorker] = []

    def start(handler: Any, queues: Sequence[str] = queues, **options: Any) -> RunningWorker:
        options.setdefault("lease_ms", lease_ms)
        options.setdefault("grace_s", 5.0)
        rw = RunningWorker(Worker(jobs, list(queues), handler, **options))
        running.append(rw)
        return rw

    yield start
    for rw in running:
        rw.worker.stop()
    for rw in running:
        rw.thread.join(10)
