"""Riding out a lost server: the one backoff policy of every loop that talks to it.

The worker's threads, the reaper and the outbox relay all keep going through an
outage instead of dying: each failed call waits, then tries again. The wait grows
with how long the server has been gone (a blip is retried at once, a long outage
is not hammered) up to a ceiling, and the outage is logged twice: when it begins
and when it ends, never once per retry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from .errors import ServerUnavailable

MAX_BACKOFF_S = 5.0  # the longest wait between two tries
FIRST_BACKOFF_S = 0.1  # the wait after the first failure

T = TypeVar("T")


class Outage:
    """The outage of one loop (or of several threads sharing one server): thread-safe."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        ceiling_s: float = MAX_BACKOFF_S,
        lost: str = "lost the server",
        back: str = "the server is back",
    ) -> None:
        self._logger = logger
        self._ceiling_s = ceiling_s
        self._lost = lost
        self._back = back
        self._lock = threading.Lock()
        self._since: float | None = None

    def down(self, exc: BaseException, during: str = "") -> float:
        """A call failed: log it if the outage is new. Returns how long to wait before
        the next try: a quarter of the time the server has been gone so far, plus the
        first wait, at most the ceiling."""
        now = time.monotonic()
        with self._lock:
            if self._since is None:
                self._since = now
                what = f" during {during}" if during else ""
                self._logger.warning("%s%s (%s); retrying with backoff", self._lost, what, exc)
            down_for = now - self._since
        return min(self._ceiling_s, FIRST_BACKOFF_S + down_for / 4)

    def up(self) -> None:
        """A call went through: the outage, if there was one, is over."""
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            self._logger.warning("%s after %.1fs", self._back, time.monotonic() - since)

    def call(self, during: str, call: Callable[[], T], give_up: threading.Event) -> T:
        """``call()``, tried again after each wait while the server is unreachable.
        Raises the last ``ServerUnavailable`` once ``give_up`` is set."""
        while True:
            try:
                result = call()
            except ServerUnavailable as exc:
                if give_up.wait(self.down(exc, during)):
                    raise
            else:
                self.up()
                return result


__all__ = ["MAX_BACKOFF_S", "Outage"]
