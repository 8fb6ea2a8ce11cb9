"""The queue registry (``emq:queues``): the queues a reaper sweeps.

Plain commands on a SET outside every queue's slot, so never part of a transition.
"""

from __future__ import annotations

import threading

from .connector import Connector, plain
from .keyspace import QUEUES_KEY, QueueKeys


class QueueRegistry:
    """Mixed into ``Jobs``: recording and listing the queues."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._registered: set[str] = set()
        self._lock = threading.Lock()

    def register_queue(self, queue: str) -> None:
        """Record ``queue`` in the registry once per process, so reapers find it."""
        keys = QueueKeys.of(queue)
        if keys.queue in self._registered:
            return
        plain(lambda: self.connector.client.sadd(QUEUES_KEY, keys.queue))
        with self._lock:
            self._registered.add(keys.queue)

    def queues(self) -> list[str]:
        """Queue names found in the registry (validated: a planted bad name is skipped)."""
        names = []
        for name in plain(lambda: self.connector.client.smembers(QUEUES_KEY)):
            try:
                names.append(QueueKeys.of(name).queue)
            except ValueError:
                continue
        return sorted(names)
