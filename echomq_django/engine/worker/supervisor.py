"""The supervisor: a worker whose tasks run in child worker processes it watches over.

``runworker --processes N`` runs one. Each child (``subworker``) is a whole worker:
it claims its jobs, runs them in its threads and completes them, with no round trip
through the supervisor, so N children use N cores. What must not depend on task
code stays here, in a process that runs none:

* the leases (``keeper``): every lease a child holds is renewed from here, so a task
  holding its child's GIL cannot let it expire; time limits and cancels stop a run
  in its child, and kill the child if the run does not end;
* a child's death: its jobs are ended here, each by what it was doing (per-job
  accounting): the job that ran alone in it is charged a crash, jobs that ran beside
  others go back solo, a job killed for its time limit or cancel fails as such, and
  jobs that had not started go back free. Then the child is started again;
* the stop: children stop claiming and finish their jobs within the grace; past it,
  a child still running one is killed *before* its jobs are released, so no job
  ever runs twice at once.

Children are fresh interpreters, given a ``setup`` function by import path, which
builds their ``Jobs`` and handler (Django's: ``django.setup()`` first).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from ..errors import Cancelled, TimeLimitExceeded
from ..events import EventLog
from ..jobs import Jobs
from ..keyspace import validate_worker_id
from ..outage import Outage
from ..outcome import EndedOutside
from .children import ChildDied, Key
from .config import WorkerConfig
from .endings import Endings
from .keeper import Keeper
from .registration import Registration
from .running import HARD_GRACE_S, Crashed, stopped_failure
from .stats import Tally, WorkerStats
from .subworker import Subworker
from .worker import LAST_REPLY_S, default_worker_id

logger = logging.getLogger("echomq.worker")

SHUTDOWN: Key = ("", "", 0)  # what a stop's kill is "for": no job's fault
START_FAILURES = 5  # children that die before they are set up, in a row: give up
# Past the grace, how long a child running no job may take to end (it sends its last
# completions, its reads bounded by the grace) before it is killed.
FLUSH_S = 1.0
# How long the stop waits for a dead child's jobs to be ended (its reader: a child is
# gone within REAP_S of its kill; ending its jobs takes round trips, an outage's too).
READER_JOIN_S = 60.0
STEADY_S = 30.0  # a child that lived this long was no crash loop: restarts are quick again
_STOPS = {"TimeLimitExceeded": TimeLimitExceeded, "Cancelled": Cancelled}


class Supervisor:
    """``processes`` child workers of ``queues``, each running ``concurrency`` jobs at
    once; ``options`` are ``WorkerConfig``'s. ``setup`` ("package.module:function") is
    called in each child with ``setup_args`` and returns its ``(jobs, handler)``."""

    def __init__(
        self,
        jobs: Jobs,
        queues: Sequence[str],
        *,
        setup: str,
        setup_args: Mapping[str, Any] | None = None,
        processes: int,
        name: str | None = None,
        ended_outside: EndedOutside | None = None,
        **options: Any,
    ) -> None:
        self.config = config = WorkerConfig(tuple(queues), processes=processes, **options)
        if processes < 1:
            raise ValueError(f"a supervisor needs processes >= 1, not {processes!r}")
        self.id = validate_worker_id(name or default_worker_id())
        self.jobs = jobs
        self.queues = list(config.queues)
        self.fatal: str | None = None
        self._stopping = threading.Event()
        self._stop_time = 0.0
        self._wake = threading.Event()
        self._tally = Tally()  # the jobs the supervisor ended itself
        self._registration = Registration(jobs, self.id, config, lambda: self.running)
        self._past = WorkerStats()  # the counts of children that are gone
        events = EventLog()
        self._outage = Outage(logger)
        self._give_up = threading.Event()
        self._endings = Endings(
            jobs, lambda *leases: None, self._tally, self._outage, self.id,
            retry_policy=config.retry_policy, crash_budget=config.crash_budget,
            give_up=self._give_up, ended_outside=ended_outside,
        )  # fmt: skip
        self._subworkers: list[Subworker] = []
        for number, max_jobs in enumerate(_split(config.max_jobs, processes)):
            if max_jobs == 0:
                continue  # max_jobs is smaller than processes: fewer children
            child = config.for_child(number, max_jobs)
            order = {"worker": child.to_json(), "setup": setup, "name": self.id,
                     "setup_args": dict(setup_args or {})}  # fmt: skip
            sub = Subworker(number, order, config.concurrency, events, self._ended)
            self._subworkers.append(sub)
        self._restarts = {sub.number: _Restarts() for sub in self._subworkers}
        self._keeper = Keeper(
            jobs, self._subworkers, self._outage, events, self.id,
            registry=self._registration.beat, registry_interval_s=config.registry_interval_s,
        )  # fmt: skip

    @property
    def processes(self) -> int:
        return self.config.processes

    @property
    def concurrency(self) -> int:
        return self.config.concurrency

    @property
    def lease_ms(self) -> int:
        return self.config.lease_ms

    @property
    def burst(self) -> bool:
        return self.config.burst

    @property
    def stats(self) -> WorkerStats:
        """The counts of every child (gone or running) and of the supervisor's own endings."""
        parts = [self._past, self._tally.stats, *(sub.stats for sub in self._subworkers)]
        return WorkerStats(
            **{f.name: sum(getattr(p, f.name) for p in parts) for f in fields(WorkerStats)}
        )

    @property
    def running(self) -> list[str]:
        return [le.claimed.id for sub in self._subworkers for le in sub.running()]

    def run(self) -> WorkerStats:
        # Children are started (and restarted: _restart_the_dead) by this thread alone,
        # which lives as long as the supervisor: a child dies when the thread that
        # forked it exits (PR_SET_PDEATHSIG), not only with this process.
        for sub in self._subworkers:
            sub.start()
        self._keeper.start()
        while not self._stopping.is_set():
            if all(sub.done and not sub.alive() for sub in self._subworkers):
                break  # each ran its burst, or its part of max_jobs
            self._restart_the_dead()
            self._wake.wait(0.2)
            self._wake.clear()
        end = self._stop_children()
        self.jobs.connector.drop_idle()  # the last calls go on fresh ones
        self._keeper.stop(end + LAST_REPLY_S)
        for sub in self._subworkers:
            sub.close()
        self._registration.remove()
        stats = self.stats
        logger.info("worker %s stopped: %s", self.id, stats)
        return stats

    def stop(self) -> None:
        """Stop claiming; running jobs get ``grace_s`` to finish. Safe from a signal handler."""
        if self._stopping.is_set():
            return
        self._stop_time = time.monotonic()
        self._stopping.set()
        self._wake.set()

    # -- children -----------------------------------------------------------------------

    def _restart_the_dead(self) -> None:
        now = time.monotonic()
        for sub in self._subworkers:
            if sub.alive() or sub.done or (sub.reader is not None and sub.reader.is_alive()):
                continue  # running, ended by itself, or its death not yet handled
            restarts = self._restarts[sub.number]
            if restarts.start_failures >= START_FAILURES:
                self.fatal = (
                    f"child worker {sub.number} died {START_FAILURES} times in a row before "
                    "it was set up (see its error above)"
                )
                logger.error("%s; stopping", self.fatal)
                self.stop()
                return
            if now >= restarts.at:
                logger.info("starting child worker %d again", sub.number)
                restarts.started = now
                sub.start()

    def _ended(self, sub: Subworker) -> None:
        """A child is gone (in its reader's thread, once it read every report): end the
        jobs it held, each by what it was doing, and plan its restart."""
        self._past = _sum(self._past, sub.stats)
        sub.stats = WorkerStats()
        leases = sub.held()
        popen = sub.popen
        code = popen.returncode if popen is not None else None
        restarts = self._restarts[sub.number]
        restarts.died(sub.ready, time.monotonic())
        if sub.done and not leases:
            return
        running = sub.running()
        died = ChildDied(code, len(running))
        # It stopped itself, its leases no longer renewed (this process was frozen, starved
        # or cut off): like a kill of ours, no job's fault.
        gave_up = sub.killed_for is None and sub.board is not None and sub.board.gave_up()
        if not self._stopping.is_set() or sub.killed_for is None:
            how = "in a crash" if sub.killed_for is None else "killed by the supervisor"
            if gave_up:
                how = "stopping itself (its leases were no longer renewed in time)"
            logger.warning("child worker %d (pid %s) died %s: %s; %d job(s) held", sub.number,
                           sub.pid, how, died, len(leases))  # fmt: skip
        killed_key, stop = sub.killed_for or (None, "")
        ours = sub.killed_for is not None or gave_up
        back = []
        for lease in leases:
            if lease in running:  # its start is the board's
                lease.stop_clock()
            if lease.key == killed_key:
                why = f"its process was killed {HARD_GRACE_S:g}s after"
                self._endings.fail(lease, stopped_failure(_STOPS[stop], why), outside=True)
            elif lease in running:
                crash = Crashed(str(died), alone=len(running) == 1 and not ours, ours=ours)
                self._endings.crashed(lease, crash)
            else:
                if sub.began(lease) and not lease.started:
                    lease.started = 1.0  # it ran, and ended: its run is counted
                back.append(lease)
        if back:
            self._endings.release(*back)
        self._wake.set()

    def _stop_children(self) -> float:
        """Children stop claiming and finish their jobs within the grace; past it, those
        still running are killed, and only then their jobs released. Returns the end.

        A child whose board shows no run at the grace's end only sends its last
        completions (its reads end with the grace: ``Worker.stop``): it gets FLUSH_S
        more, since killing it would give back jobs that ran and ended, to run again."""
        end = self._stop_time + self.config.grace_s if self._stopping.is_set() else math.inf
        for sub in self._subworkers:
            sub.shutdown(None if end == math.inf else end)
        self._wait_for_children(end)
        late = [sub for sub in self._subworkers if sub.alive()]
        running = [sub for sub in late if sub.running()]  # each late one in one list
        flushing = [sub for sub in late if sub not in running and sub.leases]
        self._kill(running, "still running jobs")
        self._kill([sub for sub in late if sub not in running + flushing], "holding no job")
        until = time.monotonic() + FLUSH_S
        while flushing and self._wait_for_children(min(until, time.monotonic() + 0.05)):
            # one that begins a run meanwhile (it started before the stop) ends now
            self._kill([sub for sub in flushing if sub.running()], "still running jobs")
            if time.monotonic() >= until:
                break
        self._kill([sub for sub in flushing if sub.alive()], "still ending their jobs")
        for sub in self._subworkers:
            if sub.reader is not None:
                sub.reader.join(READER_JOIN_S)  # their jobs ended (_ended)
                if sub.reader.is_alive():
                    logger.error("child worker %d (pid %s): its jobs not ended after %gs; "
                                 "stopping without them (their leases run out)", sub.number,
                                 sub.pid, READER_JOIN_S)  # fmt: skip
        return end

    def _wait_for_children(self, end: float) -> bool:
        """Wait until every child is gone or ``end`` (monotonic); True if one is left."""
        while any(sub.alive() for sub in self._subworkers) and time.monotonic() < end:
            self._wake.wait(min(0.1, max(0.0, end - time.monotonic())))
            self._wake.clear()
        return any(sub.alive() for sub in self._subworkers)

    def _kill(self, subs: list[Subworker], doing: str) -> None:
        """Past the grace: kill them (their jobs are ended once each is gone: _ended)."""
        subs = [sub for sub in subs if sub.alive()]
        if not subs:
            return
        logger.warning("grace time over: killing %d child worker(s) %s", len(subs), doing)
        self._give_up.set()
        for sub in subs:
            sub.kill(SHUTDOWN)

    # -- the registry ----------------------------------------------------------------------


class _Restarts:
    """When a dead child may start again: at once after a life of its own, later and
    later while it keeps dying before it is set up (a broken setup, a bad import)."""

    def __init__(self) -> None:
        self.start_failures = 0
        self.deaths = 0
        self.started = time.monotonic()
        self.at = 0.0

    def died(self, was_ready: bool, now: float) -> None:
        self.start_failures = 0 if was_ready else self.start_failures + 1
        self.deaths = 1 if now - self.started >= STEADY_S else self.deaths + 1
        self.at = now + (0.0 if self.deaths <= 1 else min(30.0, 0.5 * 2 ** (self.deaths - 2)))


def _split(total: int | None, parts: int) -> list[int | None]:
    """``total`` jobs shared by ``parts`` children (None: no limit)."""
    if total is None:
        return [None] * parts
    return [total // parts + (1 if n < total % parts else 0) for n in range(parts)]


def _sum(a: WorkerStats, b: WorkerStats) -> WorkerStats:
    return WorkerStats(**{f.name: getattr(a, f.name) + getattr(b, f.name) for f in fields(a)})


__all__ = ["SHUTDOWN", "Supervisor"]
