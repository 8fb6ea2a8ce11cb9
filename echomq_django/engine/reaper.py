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

The reaper also fires periodic schedules (``scheduler.Scheduler``). Between
sweeps it sleeps until the earliest next fire time the server reported, and never
longer than ``SCHEDULE_POLL_S``, so a tick is enqueued a few milliseconds after it
is due, and a schedule resumed or edited by another process is seen within that
bound. Any number of reapers fire each tick exactly once (the ``fire`` script's
fence). Given the schedules declared in code, a reaper first stores them on the
server (``Scheduler.sync``): that is how an edit in code takes effect on deploy.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial

from .bounds import MAX_CRASH_BUDGET
from .errors import CorruptKey, EchoMQError, ServerUnavailable
from .jobs import DEFAULT_CRASH_BUDGET, SWEEP_LIMIT, Jobs, Sweep
from .keyspace import QueueKeys
from .outage import Outage
from .outcome import EndedOutside, tell_ended
from .scheduler import FirePass, Scheduler, apart
from .schedules import Schedule
from .validation import check_int

logger = logging.getLogger("echomq.reaper")

SCHEDULE_POLL_S = 0.25  # the longest sleep between two reads of the due schedules
TICK_SLACK_S = 0.002  # wake this long after a tick is due on the server clock


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
        schedules: Sequence[Schedule] | None = None,
        ended_outside: EndedOutside | None = None,
    ) -> None:
        """``schedules``: the ones declared in code, synced to the server before the first
        tick (the schedules of the swept queues that are not among them are marked
        orphaned). None: fire what the server holds, sync nothing.

        ``ended_outside`` is told of each job the reaper moves to dead (its worker died
        running it, past the crash budget; or an operator cancelled it): no process of
        its task is left to report it (runreaper sends its task_finished)."""
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, not {interval_s!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= SWEEP_LIMIT:
            raise ValueError(f"limit must be an integer between 1 and {SWEEP_LIMIT}")
        self.jobs = jobs
        self.queues = [QueueKeys.of(q).queue for q in dict.fromkeys(queues)]
        if not self.queues and not discover:
            raise ValueError("nothing to sweep: give queues or let the reaper discover them")
        self.discover = discover
        self._registry_problem = ""  # the corrupt registry last logged
        self.interval_s = interval_s
        self.limit = limit
        check_int(crash_budget, 1, MAX_CRASH_BUDGET, "crash_budget")  # at start, not each tick
        self.crash_budget = crash_budget  # see reap.lua: crashes a job may cause, running alone
        self.scheduler = Scheduler(jobs)
        self.declared = None if schedules is None else list(schedules)
        self._synced = schedules is None
        self._ended_outside = ended_outside
        self._stopping = threading.Event()

    def queues_to_sweep(self) -> list[str]:
        """The configured queues, then the registry's (validated, without duplicates).

        A corrupt registry is logged when first seen, and the configured queues are
        swept still: a planted key must not stop the sweeps of every queue."""
        names = list(self.queues)
        if self.discover:
            try:
                found = self.jobs.queues()
            except CorruptKey as exc:
                if str(exc) != self._registry_problem:
                    logger.error("%s; sweeping only the queues given: %s", exc, names or "none")
                self._registry_problem = str(exc)
                return names
            self._registry_problem = ""
            names += [q for q in found if q not in names]
        return names

    def sweep(self, queue: str) -> QueueSweep:
        """One queue's four sweeps; each loops bounded script calls until done."""
        return QueueSweep(
            queue=queue,
            reaped=self.jobs.reap(
                queue,
                limit=self.limit,
                crash_budget=self.crash_budget,
                ended=partial(self.tell_ended, queue),
            ),
            promoted=self.jobs.promote(queue, limit=self.limit),
            trimmed_completed=self.jobs.trim(queue, "completed", limit=self.limit),
            trimmed_dead=self.jobs.trim(queue, "dead", limit=self.limit),
        )

    def tick(self, queues: Sequence[str] | None = None) -> list[QueueSweep]:
        """Sweep every queue (or ``queues``) once, logging the queues where something moved.

        One queue's failure (a corrupt key, a script error) is logged and the
        other queues are still swept; a lost server stops the tick (ServerUnavailable).
        """
        sweeps = []
        for queue in self.queues_to_sweep() if queues is None else queues:
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

    def tell_ended(self, queue: str, job_ids: Sequence[str]) -> None:
        for job_id in job_ids:
            tell_ended(self._ended_outside, queue, job_id, logger)

    def sync_schedules(self) -> None:
        """Store the declared schedules on the server (once, before the first tick).

        A lost server leaves it to do again; any other failure is logged once (the
        schedules the server holds still fire, the sweeps go on)."""
        if self._synced:
            return
        outcomes: dict[str, str] = {}
        with apart("storing the declared schedules failed; firing what the server holds"):
            outcomes = self.scheduler.sync(self.declared or (), self.queues_to_sweep())
        self._synced = True
        for name, outcome in outcomes.items():
            if outcome != "unchanged":
                logger.info("schedule %s: %s", name, outcome)

    def fire(self, queues: Sequence[str]) -> FirePass | None:
        """Fire the due schedules of ``queues`` (each tick once, whoever else fires); None
        when that failed (logged) for another reason than a lost server."""
        with apart("firing the schedules failed; the sweeps go on"):
            return self.scheduler.fire_due(queues)
        return None

    def run(self, *, once: bool = False) -> None:
        """Sweep every ``interval_s`` and fire schedules when due, until ``stop()``; ride
        out server outages with backoff."""
        outage = Outage(logger)
        next_sweep = time.monotonic()
        queues: list[str] = []
        while not self._stopping.is_set():
            started = time.monotonic()
            due: FirePass | None = None
            try:
                self.sync_schedules()
                if started >= next_sweep:
                    next_sweep = started + self.interval_s
                    queues = self.queues_to_sweep()
                    self.tick(queues)
                due = self.fire(queues)
            except ServerUnavailable as exc:
                if once:
                    raise
                next_sweep = started  # sweep again as soon as the server is back
                self._stopping.wait(outage.down(exc))
                continue
            except EchoMQError:
                if once:
                    raise
                logger.exception("a sweep failed; trying again next tick")
            outage.up()
            if once:
                return
            wait = next_sweep - started
            if due is not None and due.wait_ms is not None:
                wait = min(wait, due.wait_ms / 1000 + TICK_SLACK_S)
            wait = min(wait, SCHEDULE_POLL_S) - (time.monotonic() - started)
            self._stopping.wait(max(0.0, wait))

    def stop(self) -> None:
        """Finish the current call and return from ``run``. Safe from a signal handler."""
        self._stopping.set()


__all__ = ["QueueSweep", "Reaper"]
