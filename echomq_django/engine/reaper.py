"""The reaper: the sweeps that keep queues moving when workers die or sleep.

On every tick, per queue: expired leases back to pending (or dead past max
attempts), due scheduled jobs into pending, and completed / dead rows past their
retention dropped. Each sweep is a loop of bounded script calls (at most
``limit`` jobs per call), so no call blocks the server for long, and each call is
one atomic transition, so several reapers may sweep the same queues at once: a
job can only be moved by whichever call finds it first.

Workers promote due jobs of their own queues when they claim, so scheduled jobs
start on time without a reaper; the reaper is what rescues the jobs of a worker
that died, and what sweeps queues nobody currently serves.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import EchoMQError, ServerUnavailable
from .jobs import DEFAULT_CRASH_BUDGET, SWEEP_LIMIT, Jobs, Sweep
from .keyspace import QueueKeys

logger = logging.getLogger("echomq.reaper")

MAX_BACKOFF_S = 5.0


@dataclass(frozen=True, slots=True)
class QueueSweep:
    """What one tick did to one queue."""

    queue: str
    reaped: Sweep
    promoted: Sweep
    trimmed_completed: Sweep
    trimmed_dead: Sweep

    @property
    def moved(self) -> int:
        return (
            self.reaped.moved
            + self.reaped.dead
            + self.promoted.moved
            + self.trimmed_completed.moved
            + self.trimmed_dead.moved
        )

    def describe(self) -> str:
        return (
            f"{self.queue}: {self.reaped.moved} reaped to pending, {self.reaped.dead} reaped to "
            f"dead, {self.promoted.moved} promoted, {self.trimmed_completed.moved} completed "
            f"and {self.trimmed_dead.moved} dead rows trimmed"
        )


class Reaper:
    """Sweeps ``queues`` plus, with ``discover``, every queue in the registry of queues in use."""

    def __init__(
        self,
        jobs: Jobs,
        queues: Iterable[str] = (),
        *,
        discover: bool = True,
        interval_s: float = 1.0,
        limit: int = SWEEP_LIMIT,
        crash_budget: int = DEFAULT_CRASH_BUDGET,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, not {interval_s!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= SWEEP_LIMIT:
            raise ValueError(f"limit must be an integer between 1 and {SWEEP_LIMIT}")
        self.jobs = jobs
        self.queues = [QueueKeys.of(q).queue for q in dict.fromkeys(queues)]
        if not self.queues and not discover:
            raise ValueError("nothing to sweep: give queues or let the reaper discover them")
        self.discover = discover
        self.interval_s = interval_s
        self.limit = limit
        self.crash_budget = crash_budget  # see reap.lua: crashes a job may cause, running alone
        self._stopping = threading.Event()

    def queues_to_sweep(self) -> list[str]:
        """The configured queues, then the registry's (validated, without duplicates)."""
        names = list(self.queues)
        if self.discover:
            names += [q for q in self.jobs.queues() if q not in names]
        return names

    def sweep(self, queue: str) -> QueueSweep:
        """One queue's four sweeps; each loops bounded script calls until done."""
        return QueueSweep(
            queue=queue,
            reaped=self.jobs.reap(queue, limit=self.limit, crash_budget=self.crash_budget),
            promoted=self.jobs.promote(queue, limit=self.limit),
            trimmed_completed=self.jobs.trim(queue, "completed", limit=self.limit),
            trimmed_dead=self.jobs.trim(queue, "dead", limit=self.limit),
        )

    def tick(self) -> list[QueueSweep]:
        """Sweep every queue once, logging the queues where something moved.

        One queue's failure (a corrupt key, a script error) is logged and the
        other queues are still swept; a lost server stops the tick (ServerUnavailable).
        """
        sweeps = []
        for queue in self.queues_to_sweep():
            try:
                sweep = self.sweep(queue)
            except ServerUnavailable:
                raise
            except EchoMQError:
                logger.exception("sweeping queue %s failed; the other queues go on", queue)
                continue
            if sweep.moved:
                logger.info("%s", sweep.describe())
            sweeps.append(sweep)
        return sweeps

    def run(self, *, once: bool = False) -> None:
        """Tick every ``interval_s`` until ``stop()``; ride out server outages with backoff."""
        down_since: float | None = None
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                self.tick()
            except ServerUnavailable as exc:
                if once:
                    raise
                if down_since is None:
                    down_since = started
                    logger.warning("lost the server (%s); retrying with backoff", exc)
                self._stopping.wait(min(MAX_BACKOFF_S, 0.1 + (started - down_since) / 4))
                continue
            except EchoMQError:
                if once:
                    raise
                logger.exception("a sweep failed; trying again next tick")
            if down_since is not None:
                logger.warning("the server is back after %.1fs", time.monotonic() - down_since)
                down_since = None
            if once:
                return
            self._stopping.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def stop(self) -> None:
        """Finish the current call and return from ``run``. Safe from a signal handler."""
        self._stopping.set()


__all__ = ["QueueSweep", "Reaper"]
