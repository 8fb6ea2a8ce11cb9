"""The engine worker: claims jobs, runs a handler on them, and keeps its leases alive.

A ``Worker`` wires its parts, each a module owning its own state:

* ``fetcher``: claims batches, as many as the read-ahead policy (``readahead``)
  asks, and waits on the server when no queue has work (``waiting``);
* ``executor``: one thread per slot runs the handler (``running``: in the thread,
  or in a child process, ``children``) and ends the job by its outcome, through
  ``completions`` (batched) or ``endings`` (retry, crash, release);
* ``heartbeat``: renews the held leases, enforces time limits, sends late batches;
* ``ledger``: the held leases and where each is, the one state they share.

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
from collections.abc import Mapping, Sequence

from ..events import EventLog
from ..jobs import DEFAULT_CRASH_BUDGET, DEFAULT_LEASE_MS, Jobs
from ..keyspace import QueueKeys, validate_worker_id
from ..outage import Outage
from ..outcome import Handler
from ..registry import WorkerInfo
from ..registry import heartbeat as registry_heartbeat
from ..registry import remove as registry_remove
from ..retry_policy import RetryPolicy
from .completions import Completions
from .endings import Endings
from .executor import Executors
from .fetcher import Fetcher
from .heartbeat import Alarm, Heartbeat
from .ledger import Ledger
from .running import Runner
from .shares import plan
from .stats import Tally, WorkerStats
from .waiting import IdleWait

logger = logging.getLogger("echomq.worker")

MAX_LEASE_MS = 7 * 24 * 3600 * 1000  # what Jobs.claim accepts
DEFAULT_RETRY_POLICY = RetryPolicy()


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Worker:
    """Leased processing of ``queues`` (the first has precedence) with ``handler``.

    ``sizes`` reserves slots for queues: ``{"default": 4, "slow": 1}`` runs at most 4
    jobs of ``default`` and 1 of ``slow`` at once, and neither ever waits for the
    other's slots; unsized queues share the slots left (``shares``)."""

    def __init__(
        self,
        jobs: Jobs,
        queues: Sequence[str],
        handler: Handler,
        *,
        concurrency: int = 1,
        lease_ms: int = DEFAULT_LEASE_MS,
        name: str | None = None,
        burst: bool = False,
        max_jobs: int | None = None,
        grace_s: float = 30.0,
        retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
        idle_block_s: float = 5.0,
        registry_interval_s: float = 5.0,
        processes: int = 0,
        time_limit_s: float = 0.0,
        crash_budget: int = DEFAULT_CRASH_BUDGET,
        child_handler: str | None = None,
        child_initializer: str | None = None,
        sizes: Mapping[str, int] | None = None,
    ) -> None:
        if not queues:
            raise ValueError("a worker needs at least one queue")
        self.queues = [QueueKeys.of(q).queue for q in dict.fromkeys(queues)]
        self.id = validate_worker_id(name or default_worker_id())
        _check_positive("concurrency", concurrency)
        _check_positive("lease_ms", lease_ms)
        if lease_ms > MAX_LEASE_MS:
            raise ValueError(f"lease_ms must be at most {MAX_LEASE_MS} (7 days), not {lease_ms}")
        if max_jobs is not None:
            _check_positive("max_jobs", max_jobs)
        if grace_s < 0 or idle_block_s <= 0 or registry_interval_s <= 0:
            raise ValueError("grace_s must be >= 0, idle_block_s and registry_interval_s > 0")
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 0:
            raise ValueError(f"processes must be an integer >= 0, not {processes!r}")
        if not time_limit_s >= 0:
            raise ValueError(f"time_limit_s must be >= 0 (0: none), not {time_limit_s!r}")
        _check_positive("crash_budget", crash_budget)
        self.jobs = jobs
        self.handler = handler
        self.concurrency = concurrency
        self.processes = processes
        self.time_limit_s = time_limit_s
        self.crash_budget = crash_budget
        self.slots = concurrency * max(processes, 1)  # jobs run at once: executor threads
        self.sizes = dict(sizes or {})
        shares = plan(self.queues, self.sizes, self.slots)
        self.lease_ms = lease_ms
        self.burst = burst
        self.max_jobs = max_jobs
        self.grace_s = grace_s
        self.retry_policy = retry_policy
        self.idle_block_s = idle_block_s
        self.registry_interval_s = registry_interval_s
        self.started_at = time.time()
        self.fatal: str | None = None  # why the worker stopped itself (exit non-zero)

        self._stopping = threading.Event()
        self._stop_time = 0.0
        self._give_up = threading.Event()  # grace is over: stop retrying server calls
        self._tally = Tally()
        self.stats: WorkerStats = self._tally.stats
        outage = Outage(logger)
        self._runner = Runner(
            handler,
            processes=processes,
            threads=concurrency,
            child_handler=child_handler,
            initializer=child_initializer,
        )
        self._ledger = Ledger(shares, can_isolate=self._runner.can_isolate)
        events = EventLog()  # job events for the queues' streams (``echomq tail``)
        alarm = Alarm()
        self._idle = IdleWait(jobs, self.queues, idle_block_s, self._stopping)
        self._completions = Completions(
            jobs, self._ledger, self._tally, outage, self.id,
            give_up=self._give_up, on_due=alarm.wake_up.set, events=events,
        )  # fmt: skip
        self._endings = Endings(
            jobs, self._ledger, self._tally, outage, self.id,
            retry_policy=retry_policy, crash_budget=crash_budget, give_up=self._give_up,
        )  # fmt: skip
        self._executors = Executors(
            jobs, self._ledger, self._runner, self._completions, self._endings, alarm, outage,
            self.id, slots=self.slots, time_limit_s=time_limit_s, stopping=self._stopping,
            give_up=self._give_up,
        )  # fmt: skip
        self._heartbeat = Heartbeat(
            jobs, self._ledger, self._runner, self._completions, self._endings, alarm,
            self._tally, outage, stopping=self._stopping, registry=self._beat_registry,
            registry_interval_s=registry_interval_s, watchdog=self._idle.watchdog,
            events=events, worker_id=self.id,
        )  # fmt: skip
        self._fetcher = Fetcher(
            jobs, self._ledger, self._idle, alarm, self._tally, outage, self.id,
            queues=self.queues, lease_ms=lease_ms, isolated=bool(processes), burst=burst,
            max_jobs=max_jobs, stopping=self._stopping, on_fatal=self._fail_fatally,
            events=events,
        )  # fmt: skip

    def run(self) -> WorkerStats:
        """Process jobs until stopped (or, with burst / max_jobs, until done). Returns stats."""
        self._runner.start()
        self._executors.start()
        self._heartbeat.start()
        self._fetcher.start()
        while self._fetcher.is_alive():  # a timed join: the main thread stays signal-responsive
            self._fetcher.join(0.2)
            if self._stopping.is_set():
                # stop() cut the idle block, but one that began just then (the stop
                # check passed, the connection not yet sent on) reconnects and blocks
                # on: cut again until the fetcher is gone.
                self._idle.interrupt()
        if self._stopping.is_set():  # a burst or max_jobs run still runs what it claimed
            waiting = self._ledger.take_ready()
            if waiting:
                self._endings.release(*waiting)
        if not self._ledger.drain(self._grace_end):
            self._give_up.set()
            self._end_running()
        self._ledger.close()
        self._completions.flush()
        self._heartbeat.stop()
        self._unregister()
        self._idle.close()
        self._runner.close()
        logger.info("worker %s stopped: %s", self.id, self.stats)
        return self.stats

    def stop(self) -> None:
        """Stop claiming; running jobs get ``grace_s`` to finish. Safe from a signal handler."""
        if self._stopping.is_set():
            return
        self._stop_time = time.monotonic()
        self._stopping.set()
        self._idle.interrupt()

    @property
    def idle(self) -> bool:
        """True while the worker waits on the server because no queue has ready work."""
        return self._idle.waiting

    @property
    def running(self) -> list[str]:
        """Ids of the jobs whose task runs now (read-ahead jobs not yet started excluded)."""
        return self._ledger.running_ids()

    def _fail_fatally(self, why: str) -> None:
        self.fatal = why
        self.stop()

    def _grace_end(self) -> float | None:
        """When the running jobs' grace ends (None: not stopping, wait for them)."""
        return self._stop_time + self.grace_s if self._stopping.is_set() else None

    def _end_running(self) -> None:
        """The grace time is over and jobs still run. Never release a job whose task may
        still run (another worker would start it beside): in process mode the children
        running them are killed first, then the jobs released; in thread mode a thread
        cannot be killed, so they are left to the reaper, which returns them once this
        process is gone and their leases run out."""
        leases = self._ledger.unfinished()
        if not leases:
            return
        if self.processes:
            logger.warning(
                "grace time over: killing the children of %d running job(s)", len(leases)
            )
            self._runner.kill_running()
            self._endings.release(*leases)
        else:
            logger.warning(
                "grace time over: %d job(s) still running; the reaper returns them after "
                "their lease",
                len(leases),
            )
            for lease in leases:
                lease.released = True  # their outcome, if it comes, is not for us to send

    def _beat_registry(self) -> None:
        info = WorkerInfo(
            id=self.id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=list(self.queues),
            concurrency=self.slots,
            running=self.running,
            started_at=self.started_at,
            last_seen=time.time(),
            sizes=self.sizes,
            processes=self.processes,
        )
        try:
            registry_heartbeat(self.jobs.connector, info, ttl_s=self.registry_interval_s * 4)
        except Exception as exc:  # the registry is for people: never let it stop the work
            logger.debug("registry heartbeat failed: %s", exc)

    def _unregister(self) -> None:
        try:
            registry_remove(self.jobs.connector, self.id)
        except Exception as exc:
            logger.debug("could not remove the worker from the registry: %s", exc)


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
