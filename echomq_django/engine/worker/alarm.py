"""When the heartbeat must next look at the leases, and the way to wake it sooner."""

from __future__ import annotations

import math
import threading


class Alarm:
    """When the heartbeat must next look at the leases, and its wake-up: set by whoever
    learns of a sooner renewal (a claim, a job starting) or of a batch to send. The
    heartbeat scans the held leases only when one may need renewing: with a large
    read-ahead it does not wake for every flush."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._renew_at = math.inf  # monotonic: no held lease needs renewing before this
        self.wake_up = threading.Event()

    def renew_by(self, at: float, *, wake: bool = False) -> None:
        if at < self._renew_at:
            with self._lock:
                self._renew_at = min(self._renew_at, at)
            if wake:
                self.wake_up.set()

    def renew_at(self) -> float:
        return self._renew_at

    def due(self, now: float) -> bool:
        """A renewal is due: the next one is unknown until the heartbeat's scan."""
        with self._lock:
            if now < self._renew_at:
                return False
            self._renew_at = math.inf
            return True
