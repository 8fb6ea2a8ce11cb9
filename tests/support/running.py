"""An engine Worker running in a thread of the test process, joined for its stats."""

from __future__ import annotations

import threading

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
