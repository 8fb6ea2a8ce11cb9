"""A worker's entry in the worker registry: who it is, on what, what it runs now.

Written when the worker starts and on every registry beat, removed when it stops.
The registry is for people (the admin, ``echomq workers``): a failure to write it is
logged and never stops the work.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable

from ..jobs import Jobs
from ..registry import WorkerInfo
from ..registry import heartbeat as registry_heartbeat
from ..registry import remove as registry_remove
from .config import WorkerConfig

logger = logging.getLogger("echomq.worker")


class Registration:
    def __init__(
        self, jobs: Jobs, worker_id: str, config: WorkerConfig, running: Callable[[], list[str]]
    ) -> None:
        self._jobs = jobs
        self._id = worker_id
        self._config = config
        self._running = running  # the ids of the jobs whose tasks run now
        self.started_at = time.time()

    def beat(self) -> None:
        config = self._config
        info = WorkerInfo(
            id=self._id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=list(config.queues),
            concurrency=config.slots,
            running=self._running(),
            started_at=self.started_at,
            last_seen=time.time(),
            sizes=dict(config.sizes),
            processes=config.processes,
        )
        try:
            registry_heartbeat(self._jobs.connector, info, ttl_s=config.registry_interval_s * 4)
        except Exception as exc:  # the registry is for people: never let it stop the work
            logger.debug("registry heartbeat failed: %s", exc)

    def remove(self) -> None:
        try:
            registry_remove(self._jobs.connector, self._id)
        except Exception as exc:
            logger.debug("could not remove the worker from the registry: %s", exc)
