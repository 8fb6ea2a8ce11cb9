"""The engine worker: claims jobs, runs a handler on them, and keeps its leases alive.

A ``Worker`` wires its parts, each a module owning its own state:

* ``executor``: one thread per slot runs the handler (``running``) and ends the
  job by its outcome, through ``completions`` (batched) or ``endings`` (retry,
  crash, release); between jobs it drives the worker's ``wire`` (``driver``):
  ``claims`` in batches, as many as the read-ahead policy (``readahead``) asks, and
  the completions, without waiting for either; with no work it waits on the server
  (``waiting``);
* ``heartbeat``: renews the held leases, enforces time limits, and drives the wire
  while every executor is busy;
* ``ledger``: the held leases and where each is, the one state they share.

A worker runs its tasks in threads of its own process. With ``processes``, the
``Supervisor`` (``supervisor.py``) runs such workers as child processes instead,
each with a ``link`` to it: the supervisor keeps their leases, where no task can
starve it.

Stopping (``stop()``, e.g. on SIGTERM): claim nothing more, give back jobs that
have not started, let running jobs finish within ``grace_s``, then end the rest
(``_end_running``) and return.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from ..errors import Cancelled, TimeLimitExceeded
from ..events import EventLog
from ..jobs import Jobs
from ..keyspace import validate_worker_id
from ..outage import Outage
from ..outcome import EndedOutside, Handler
from .alarm import Alarm
from .children import Key
from .claims import Claims
from .completions import Completions
from .config import WorkerConfig
from .driver import Driver
from .endings import Endings
from .executor import Executors
from .heartbeat import Heartbeat
from .ledger import Ledger
from .link import Link
from .registration import Registration
from .running import Runner
from .stats import Tally, WorkerStats
from .waiting import IdleWait
from .wire import Wire

logger = logging.getLogger("echomq.worker")

# The completions the shutdown sends as the grace ends get this long for their replies
# (a reachable server answers in a ms); no read waits longer past the grace.
LAST_REPLY_S = 0.25


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Worker:
    """Leased processing of ``queues`` (the first has precedence) with ``handler``;
    ``options`` are ``WorkerConfig``'s (concurrency, lease_ms, sizes, ...).

    ``child_handler`` and ``child_initializer`` (import paths) let a solo job run in
    a child process of its own when ``handler`` cannot be sent there by reference.
    ``ended_outside`` is told of a job that ended for good without its handler's say
    (its process crashed): the handler had no chance to (Django's task_finished)."""

    def __init__(
        self,
        jobs: Jobs,
        queues: Sequence[str],
        handler: Handler,
        *,
        name: str | None = None,
        child_handler: str | None = None,
        child_initializer: str | None = None,
        link: Link | None = None,
        ended_outside: EndedOutside | None = None,
        **options: Any,
    ) -> None:
        self.config = config = WorkerConfig(tuple(queues), **options)
        if config.processes:
            raise ValueError("a Worker runs its tasks itself: use a Supervisor for processes")
        self.id = validate_worker_id(name or default_worker_id())
        self.jobs = jobs
        self.handler = handler
        self.queues = list(config.queues)
        self.fatal: str | None = None  # why the worker stopped itself (exit non-zero)
        self._link = link
        # A supervised child's grace is its supervisor's to end (by killing it).
        self._grace_s = float("inf") if link is not None else config.grace_s

        self._stopping = threading.Event()
        self._done = threading.Event()  # nothing more to do: a burst's queues are empty, max_jobs
        self._stop_time = 0.0
        self._give_up = threading.Event()  # grace is over: stop retrying server calls
        self._tally = Tally()
        self.stats: WorkerStats = self._tally.stats
        self._registration = Registration(jobs, self.id, config, lambda: self.running)
        if link is not None:
            link.stats = self.stats
        outage = Outage(logger)
        self._runner = Runner(
            handler,
            child_handler=child_handler,
            initializer=child_initializer,
            isolate=link is None,  # a supervised child is a process of its own already
        )
        self._ledger = Ledger(
            config.shares(),
            can_isolate=self._runner.can_isolate,
            on_forget=None if link is None else link.gone,
        )
        events = EventLog()  # job events for the queues' streams (``echomq tail``)
        alarm = Alarm()
        self._wire = Wire(jobs.connector, outage)
        self._idle = IdleWait(jobs, self.queues, config.idle_block_s, self._stopping)
        self._completions = Completions(
            jobs, self._wire, self._ledger, self._tally, self.id,
            give_up=self._give_up, events=events,
        )  # fmt: skip
        claims = Claims(
            jobs, self._wire, self._ledger, alarm, self._tally, outage, events, self.id,
            config=config, link=link,
        )  # fmt: skip
        self._driver = Driver(
            self._wire, claims, self._completions, self._ledger, self._idle, config=config,
            stopping=self._stopping, done=self._done, on_fatal=self._fail_fatally,
        )  # fmt: skip
        self._endings = Endings(
            jobs, self._ledger.forget, self._tally, outage, self.id,
            retry_policy=config.retry_policy, crash_budget=config.crash_budget,
            give_up=self._give_up, ended_outside=ended_outside,
        )  # fmt: skip
        self._executors = Executors(
            jobs, self._ledger, self._runner, self._completions, self._endings, self._driver,
            alarm, outage, self.id, config=config, link=link, stopping=self._stopping,
            give_up=self._give_up,
        )  # fmt: skip
        self._heartbeat = Heartbeat(
            jobs, self._ledger, self._runner, self._completions, self._endings, alarm,
            self._tally, outage, self._driver,
            stopping=self._stopping, renews=link is None,
            registry=self._registration.beat if link is None else None,
            registry_interval_s=config.registry_interval_s, watchdog=self._idle.watchdog,
            events=events, worker_id=self.id,
        )  # fmt: skip

    @property
    def concurrency(self) -> int:
        return self.config.concurrency

    @property
    def lease_ms(self) -> int:
        return self.config.lease_ms

    @property
    def burst(self) -> bool:
        return self.config.burst

    def run(self) -> WorkerStats:
        """Process jobs until stopped (or, with burst / max_jobs, until done). Returns stats."""
        self._heartbeat.start()
        self._executors.start()
        while not (self._stopping.is_set() or self._done.is_set()):
            self._done.wait(0.2)  # a timed wait: the main thread stays signal-responsive
        if self._stopping.is_set():  # a burst or max_jobs run still runs what it claimed
            waiting = self._ledger.take_ready()
            if waiting:
                self._endings.release(*waiting)
        if not self._ledger.drain(self._grace_end, self._cut_idle_wait):
            self._give_up.set()
            self._end_running()
        self._ledger.close()
        self._completions.flush()
        self.jobs.connector.drop_idle()  # the last calls go on fresh ones
        self._heartbeat.stop(self._wire.deadline)
        if self._link is None:
            self._registration.remove()
        self._idle.close()
        self._wire.close()
        self._runner.close()
        logger.info("worker %s stopped: %s", self.id, self.stats)
        return self.stats

    def stop(self, deadline: float | None = None) -> None:
        """Stop claiming; running jobs get ``grace_s`` to finish. Safe from a signal handler.

        ``deadline`` (monotonic, one clock for the machine's processes): when a
        supervisor ends this child's grace; no read waits past it, so the completions of
        finished jobs are confirmed, or sent again on a fresh connection, before then."""
        if self._stopping.is_set():
            return
        self._stop_time = time.monotonic()
        if deadline is None:
            deadline = self._stop_time + self._grace_s
        self._wire.stop_by(deadline + LAST_REPLY_S)
        self._stopping.set()
        self._idle.interrupt()

    def stop_run(self, key: Key, stop: type[TimeLimitExceeded | Cancelled], why: str) -> None:
        """A supervisor's soft stop of one held job: raised in its task if it runs; a
        cancelled one that has not started ends as cancelled instead of running."""
        lease = self._ledger.get(key)
        if lease is None or lease.finishing:
            return
        if stop is Cancelled:
            lease.cancelled = why or "cancelled by an operator"
        self._runner.stop(key, stop)

    def lose(self, key: Key, why: str) -> None:
        """A supervisor found the lease lost: the job's outcome is not ours to send."""
        lease = self._ledger.get(key)
        if lease is not None and not lease.finishing:
            lease.lost = why
            self._tally.add("lost")

    @property
    def idle(self) -> bool:
        """True while the worker waits on the server because no queue has ready work."""
        return self._idle.waiting

    @property
    def running(self) -> list[str]:
        """Ids of the jobs whose task runs now (read-ahead jobs not yet started excluded)."""
        return self._ledger.running_ids()

    def _cut_idle_wait(self) -> None:
        """stop() cut the idle wait, but one that began just then (the stop check passed,
        the connection not yet sent on) reconnects and blocks on: cut again while an
        executor waits on the server."""
        if self._driver.idling:
            self._idle.interrupt()

    def _fail_fatally(self, why: str) -> None:
        self.fatal = why
        self.stop()

    def _grace_end(self) -> float | None:
        """When the running jobs' grace ends (None: not stopping, wait for them)."""
        return self._stop_time + self._grace_s if self._stopping.is_set() else None

    def _end_running(self) -> None:
        """The grace time is over and jobs still run. Never release a job whose task may
        still run (another worker would start it beside): a run in the solo child is
        killed first, then released free; a thread cannot be killed, so a run in one is
        left (``Endings.leave``): the reaper returns it free once this process is gone
        and its lease runs out. (A supervisor kills its child before releasing its jobs.)"""
        leases = self._ledger.unfinished()
        if not leases:
            return
        for lease in leases:
            lease.released = True  # their outcome, if it comes, is not for us to send
        if self._link is not None:
            return  # a supervisor's child: the supervisor kills it, then releases its jobs
        in_child = set(self._runner.kill_child_runs())
        killed = [lease for lease in leases if lease.key in in_child]
        left = [lease for lease in leases if lease.key not in in_child]
        if killed:
            logger.warning("grace time over: killed the child running %d job(s)", len(killed))
            self._endings.release(*killed)
        if left:
            logger.warning(
                "grace time over: %d job(s) still running in threads; the reaper returns "
                "them, free, after their lease",
                len(left),
            )
            self._endings.leave(*left)
