"""What one run of a worker did, counted from all of its threads."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass
class WorkerStats:
    """Counters of one run. ``stale`` and ``lost`` are never task failures."""

    claimed: int = 0
    completed: int = 0
    retried: int = 0
    dead: int = 0
    stale: int = 0  # completes/retries the fence refused: the lease was lost meanwhile
    lost: int = 0  # leases the heartbeat found lost; their outcome was discarded
    released: int = 0  # given back at shutdown (not counted as attempts)

    def __str__(self) -> str:  # the exit line: "claimed 3, completed 1, retried 1, ..."
        return ", ".join(f"{name} {getattr(self, name)}" for name in self.__dataclass_fields__)


class Tally:
    """The one writer of a run's ``WorkerStats``: any thread adds, under one lock."""

    def __init__(self) -> None:
        self.stats = WorkerStats()
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        if n:
            with self._lock:
                setattr(self.stats, name, getattr(self.stats, name) + n)
