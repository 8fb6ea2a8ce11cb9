"""The queue registry (``emq:queues``): the queues a reaper sweeps.

Plain commands on a SET outside every queue's slot, so never part of a transition.
It is bookkeeping: a key of another type planted at its name (an operator's typo,
another application's key) must not stop enqueues, nor the sweeps of the queues a
reaper is given. Reading it says so (``CorruptKey`` naming the key); recording a
queue in it logs the problem once per process and lets the job be stored.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from .connector import Connector, plain
from .errors import CorruptKey, ScriptError
from .keyspace import QUEUES_KEY, QueueKeys

logger = logging.getLogger("echomq.registry")


def on_registry(command: Callable[[], Any]) -> Any:
    """Run a command on the registry; ``CorruptKey`` when its key is no SET."""
    try:
        return plain(command)
    except ScriptError as exc:
        if not str(exc).startswith("WRONGTYPE"):
            raise
        raise CorruptKey(
            f"{QUEUES_KEY} holds another type than a set (the registry of queues in use): "
            "repair or delete the key"
        ) from exc


class QueueRegistry:
    """Mixed into ``Jobs``: recording and listing the queues."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._registered: set[str] = set()
        self._lock = threading.Lock()
        self._told_corrupt = False

    def register_queue(self, queue: str) -> None:
        """Record ``queue`` in the registry once per process, so reapers find it.

        Over a corrupt registry the queue is not recorded (tried again next time) and
        the caller goes on: its jobs are stored, and a reaper given the queue sweeps it.
        """
        keys = QueueKeys.of(queue)
        if keys.queue in self._registered:
            return
        try:
            on_registry(lambda: self.connector.client.sadd(QUEUES_KEY, keys.queue))
        except CorruptKey as exc:
            if not self._told_corrupt:
                self._told_corrupt = True
                logger.error(
                    "%s; queue %s is not recorded, so a reaper finds it only if it is given "
                    "the queue (its jobs are stored)",
                    exc,
                    keys.queue,
                )
            return
        with self._lock:
            self._registered.add(keys.queue)

    def queues(self) -> list[str]:
        """Queue names found in the registry (validated: a planted bad name is skipped)."""
        names = []
        for name in on_registry(lambda: self.connector.client.smembers(QUEUES_KEY)):
            try:
                names.append(QueueKeys.of(name).queue)
            except ValueError:
                continue
        return sorted(names)
