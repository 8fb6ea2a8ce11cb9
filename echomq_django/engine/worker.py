"""The engine worker: claims jobs, runs a handler on them, and keeps its leases alive.

Three kinds of thread, each for a reason:

* the **fetcher** claims batches (one script call leases many jobs) and, when no
  queue has work, blocks on the server (BZPOPMIN on the queues' wake keys, on its
  own connection) until an enqueue wakes it or the next scheduled job is due. It
  never polls in a sleep loop.
* ``concurrency`` **executors** run the handler. Completions of short jobs are
  pipelined (``Jobs.complete_many``): whoever finishes a job when no other job is
  waiting locally flushes the batch, so fast jobs share a round trip and a job
  that ends a batch reports at once.
* the **heartbeat** renews every held lease (``Jobs.extend_many``, token-fenced)
  at a third of its length, flushes completions that waited over 20 ms (a slow
  job never holds back the results of short ones), refreshes the worker registry,
  and watches the fetcher's blocking read. It is its own thread so a busy task
  cannot starve it.

A lease the heartbeat finds lost (``StaleToken``: reaped, then claimed by someone
else) is logged as such, apart from task failures, and its outcome is discarded:
the worker never completes a job over its new holder; the fence would refuse it
anyway.

Stopping (``stop()``, e.g. on SIGTERM): claim nothing more, give back jobs that
have not started, let running jobs finish within ``grace_s``, release the rest
(``Jobs.release``: not counted as an attempt) and return.
"""

# Over ~400 lines: the fetcher, executors, heartbeat, completions and shutdown of one Worker
# still share its state; the split into a package of one concept per module is issue 15's open
# part.

from __future__ import annotations

import logging
import math
import os
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .errors import (
    Cancelled,
    CancelRequested,
    EchoMQError,
    ServerUnavailable,
    StaleToken,
    TimeLimitExceeded,
)
from .events import EVENTS_AGE_S, EventLog, failure_traceback, log_job
from .jobs import BATCH_MAX, DEFAULT_CRASH_BUDGET, DEFAULT_LEASE_MS, Claim, Claimed, Jobs
from .keyspace import QueueKeys, validate_worker_id
from .outcome import Failure, Handler, Outcome, Success, error_json, summary_line
from .outcome import error_object as _as_error_object
from .outcome import failure_from_exception as failure_from_exception
from .registry import WorkerInfo
from .registry import heartbeat as registry_heartbeat
from .registry import remove as registry_remove
from .retry_policy import RetryPolicy
from .running import Crashed, Runner, stopped_failure

logger = logging.getLogger("echomq.worker")

FLUSH_MAX = BATCH_MAX  # completions per flush: one complete script call
FLUSH_AGE_S = 0.02  # a finished job waits at most this long for others to share its flush
READ_AHEAD_BUDGET_MS = 50.0  # how long a read-ahead job may wait locally, on average
MAX_READ_AHEAD = 1000
# Jobs per claim call at most: a big read-ahead is refilled in steps, each claimed
# while the jobs before it run, so the executors never wait for a claim's round trip.
# Large enough that the fetcher's fixed cost per call (a round trip, the wait for the
# GIL after it) is spread thin: with short jobs the fetcher claims back to back.
CLAIM_STEP = 250
# A read-ahead job still waiting after this long sits behind a slow one: it is given
# back to pending (refunded) so that another worker can run it.
READ_AHEAD_GIVE_BACK_S = 0.25
GIVE_BACK_CHECK_S = 0.05  # how often the heartbeat looks for such jobs
MAX_BACKOFF_S = 5.0  # reconnect backoff ceiling
MAX_LEASE_MS = 7 * 24 * 3600 * 1000  # what Jobs.claim accepts
DEFAULT_RETRY_POLICY = RetryPolicy()
BLOCK_SLACK_S = 2.0
STAMP_AFTER_S = 0.05
CANCEL_CHECK_S = 1.0  # a running job's lease is renewed at least this often  # a run still going after this long gets its start time stamped  # socket_timeout = block timeout + this: a hung read cannot wedge us


@dataclass
class WorkerStats:
    """Counters of one run. ``stale`` and ``lost`` are never task failures."""

    claimed: int = 0
    completed: int = 0
    retried: int = 0
    dead: int = 0
    stale: int = 0  # completes/retries the fence refused: the lease was lost meanwhile
    lost: int = 0  # leases the heartbeat found lost; their outcome was discarded
    released: int = 0  # given back at shutdown (not counted as attempts)

    def __str__(self) -> str:  # the exit line: "claimed 3, completed 1, retried 1, ..."
        return ", ".join(f"{name} {getattr(self, name)}" for name in self.__dataclass_fields__)


@dataclass(eq=False, slots=True)
class _Lease:
    """A job this worker holds, from claim until its outcome is stored."""

    claimed: Claimed
    lease_ms: int
    renewed_at: float  # monotonic time just before the call that set the current deadline
    claimed_at: float = 0.0
    armed: bool = False  # marked started on the server (claim or start): it may run
    armed_at_claim: bool = False  # the claim marked it: its snapshot lists this run already
    solo: bool = False  # it was running when a worker died: it runs alone (reap.lua)
    server_us: int = 0  # the server's clock at the claim (µs), read at monotonic `claimed_at`
    stamped: bool = False  # the server holds this run's start time
    announced: bool = False  # its "started" event is out (a run past STAMP_AFTER_S)
    started: float = 0.0
    elapsed_ms: float = 0.0  # how long the handler ran
    finishing: bool = False  # the outcome is on its way: a refused extend means nothing
    lost: str = ""  # why the heartbeat found the lease lost
    released: bool = False
    abandoned: bool = False  # stuck past its time limit: failed, its slot given to a new thread
    slot: int = 0  # the executor running it
    cancelled: str = ""  # an operator's reason: the task is being stopped
    key: tuple[str, str, int] = field(init=False)  # (queue, id, token): this lease

    def __post_init__(self) -> None:
        # A job may come back to this worker (released, reaped): its token tells the two apart.
        self.key = (self.claimed.queue, self.claimed.id, self.claimed.token)

    @property
    def task(self) -> str:
        return self.claimed.job.task if self.claimed.job else "?"

    def begin_run(self, worker_id: str) -> None:
        """The run starts now: the row snapshot the handler sees says so, as the server
        will once it is stamped (one time conversion: the claim's server clock plus
        the monotonic time since)."""
        self.started = time.monotonic()
        job = self.claimed.job
        if job is None:
            return
        now_us = self.server_us + int((self.started - self.claimed_at) * 1_000_000)
        if not self.armed_at_claim:
            job.worker_ids = (*job.worker_ids, worker_id)
        job.last_attempted_at = now_us
        if job.started_at is None:
            job.started_at = now_us

    def ran_us(self) -> int:
        """How long ago its run began, for the server to stamp it; -1 once stamped."""
        if self.stamped or not self.started:
            return -1
        return int((time.monotonic() - self.started) * 1_000_000)


def _renewal_time(lease: _Lease) -> float:
    """When the lease is a third through: the heartbeat extends it then. A running job's
    is renewed at least every CANCEL_CHECK_S: the renewal is how a cancel reaches it."""
    every = lease.lease_ms / 3000
    if lease.started:
        every = min(every, CANCEL_CHECK_S)
    return lease.renewed_at + every


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Worker:
    """Leased processing of ``queues`` (the first has precedence) with ``handler``."""

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
        self._runner = Runner(
            handler,
            processes=processes,
            threads=concurrency,
            child_handler=child_handler,
            initializer=child_initializer,
            on_abandon=self._abandon,
        )
        self.lease_ms = lease_ms
        self.burst = burst
        self.max_jobs = max_jobs
        self.grace_s = grace_s
        self.retry_policy = retry_policy
        self.idle_block_s = idle_block_s
        self.registry_interval_s = registry_interval_s
        self.stats = WorkerStats()
        self.started_at = time.time()
        self.events = EventLog()  # job events for the queues' streams (``echomq tail``)

        self._lock = threading.Lock()  # guards _held, _running, _outbox, _flushing, stats
        # Notified when a held job is let go, and when an executor starts a job and
        # _room_for_batch() holds while the fetcher waits.
        self._room = threading.Condition(self._lock)
        self._held: dict[tuple[str, str, int], _Lease] = {}
        # Started and not finished (a finished job stays held until its flush): at most
        # one per executor, so read-ahead sizing need not scan the whole read-ahead.
        self._running: set[_Lease] = set()
        # Claimed, not yet started, in claim order; executors wait on _work for them.
        self._ready: deque[_Lease] = deque()
        self._work = threading.Condition(self._lock)
        self._closing = False  # executors exit once the ready jobs are gone
        self._solo: _Lease | None = None  # a solo job taken: nothing else starts meanwhile
        self._solo_held = 0  # solo jobs held: the fetcher claims nothing more meanwhile

        # Claim ids never repeat, not even for a worker restarted under the same name
        # (a replay would return the old claim's jobs instead of new ones).
        self._claim_prefix = f"{secrets.token_hex(8)}."
        self._claim_seq = 0
        self._claim_ids: dict[str, str] = {}  # queue -> the id of a claim to replay
        self.fatal: str | None = None  # why the worker stopped itself (exit non-zero)
        self._outbox: list[tuple[_Lease, str]] = []
        self._outbox_since = 0.0
        # The heartbeat scans the held leases only when one may need renewing (or
        # may be stuck): with a large read-ahead it wakes for every flush.
        self._renew_at = math.inf  # monotonic: no held lease needs renewing before this
        self._next_give_back_check = 0.0
        self._flushing = 0  # finished jobs whose completions are on the wire now
        self._read_ahead = concurrency  # the fetcher's last _target()
        self._fetcher_waiting = False  # the fetcher waits on _room for a batch worth claiming
        self._avg_ms: float | None = None  # moving average of handler durations
        self._stopping = threading.Event()
        self._stop_time = 0.0
        self._abandoned = threading.Event()  # grace is over: stop retrying server calls
        self._beat_wake = threading.Event()
        self._beat_done = threading.Event()
        self._down_since: float | None = None  # the server outage being ridden out
        self._blocker: redis.Redis | None = None
        self._blocking_since: float | None = None  # for the watchdog
        self._waiting = False
        # On a cluster one blocking call cannot span the queues' slots: a waiter per queue.
        self._waiters = (
            _QueueWaiters(jobs.connector.client, self.queues, idle_block_s + BLOCK_SLACK_S)
            if jobs.connector.is_cluster
            else None
        )

    # -- public -----------------------------------------------------------------------

    def run(self) -> WorkerStats:
        """Process jobs until stopped (or, with burst / max_jobs, until done). Returns stats."""
        self._runner.start()
        for slot in range(self.slots):
            self._executor(slot)
        beat = threading.Thread(target=self._heartbeat_loop, name="echomq-heartbeat", daemon=True)
        fetcher = threading.Thread(target=self._fetch_loop, name="echomq-fetcher", daemon=True)
        for thread in (beat, fetcher):
            thread.start()
        while fetcher.is_alive():  # join with a timeout: the main thread stays signal-responsive
            fetcher.join(0.2)
            if self._stopping.is_set():
                # stop() cut the idle block, but one that began just then (the stop
                # check passed, the connection not yet sent on) reconnects and blocks
                # on: cut again until the fetcher is gone.
                self._interrupt_block()
        if self._stopping.is_set():
            self._release_waiting()  # a burst or max_jobs run still runs what it claimed
        if not self._drain():
            self._abandoned.set()
            self._end_running()
        with self._work:
            self._closing = True
            self._work.notify_all()
        self._flush()
        self._send_events()
        self._beat_done.set()
        self._beat_wake.set()
        beat.join(5)
        self._unregister()
        self._close_blocker()
        self._runner.close()
        logger.info("worker %s stopped: %s", self.id, self.stats)
        return self.stats

    def stop(self) -> None:
        """Stop claiming; running jobs get ``grace_s`` to finish. Safe from a signal handler."""
        if self._stopping.is_set():
            return
        self._stop_time = time.monotonic()
        self._stopping.set()
        self._interrupt_block()

    @property
    def idle(self) -> bool:
        """True while the worker waits on the server because no queue has ready work."""
        return self._waiting

    @property
    def running(self) -> list[str]:
        """Ids of the jobs whose task runs now (read-ahead jobs not yet started excluded)."""
        with self._lock:
            return [lease.claimed.id for lease in self._running]

    # -- fetcher ----------------------------------------------------------------------

    def _fetch_loop(self) -> None:
        try:
            while self._wait_for_room():
                empty_before = self._held_count() == 0
                try:
                    claimed, next_due = self._claim_round()
                except ServerUnavailable as exc:
                    self._server_down("claim", exc)
                    continue
                except EchoMQError as exc:  # e.g. BUSY (another script), OOM: try again soon
                    logger.error("claim failed: %s; retrying in 1s", exc)
                    self._stopping.wait(1.0)
                    continue
                self._server_up()
                if claimed:
                    continue
                if self.burst and empty_before:
                    logger.info("burst: the queues are empty and nothing is running")
                    return
                if not self.burst:
                    self._block(next_due)
                else:  # burst with jobs still running: they may retry into pending
                    self._wait_for_change()
        except BaseException as exc:
            logger.exception("the fetcher failed; stopping the worker")
            self.fatal = f"the fetcher failed: {type(exc).__name__}: {exc}"
            self.stop()

    def _wait_for_room(self) -> bool:
        """Wait until a batch is worth claiming. False: stop claiming for good."""
        with self._room:
            while True:
                if self._stopping.is_set() or self._quota() == 0:
                    return False
                self._read_ahead = self._target()
                if self._solo_held == 0 and self._room_for_batch():
                    return True
                self._fetcher_waiting = True
                self._room.wait(0.5)
                self._fetcher_waiting = False

    def _room_for_batch(self) -> bool:
        """A claim step (or half the read-ahead, if less) is free, or nothing is left to
        start: claim now, while the rest runs, so that the executors never wait for a
        claim's round trip. Called with the lock held."""
        free = self._read_ahead - self._unfinished()
        return free > 0 and (free >= min(CLAIM_STEP, self._read_ahead / 2) or not self._ready)

    def _unfinished(self) -> int:
        """Held jobs not yet finished. Finished ones wait for their completion in the
        outbox (or on the wire), not for an executor. Called with the lock held."""
        return len(self._held) - len(self._outbox) - self._flushing

    def _wait_for_change(self) -> None:
        """Until a held job is let go (it may have gone back to pending), at most 1 s."""
        with self._room:
            self._room.wait(1.0)

    def _claim_round(self) -> tuple[int, tuple[int, str] | None]:
        """Claim from the queues in order until the batch is full.

        Returns how many jobs were claimed, and when the earliest scheduled job of
        the queues is due: (milliseconds from now on the server clock, its queue).
        """
        with self._lock:
            want = min(self._target() - self._unfinished(), self._quota(), CLAIM_STEP)
        got, next_due = 0, None
        for name in self.queues:
            if got >= want:
                break
            sent = time.monotonic()
            claim = self.jobs.claim(
                name,
                self.id,
                count=want - got,
                lease_ms=self.lease_ms,
                claim_id=self._claim_id(name),
                # All of them: each starts within the read-ahead budget (50 ms of work),
                # and a job marked started that had not yet run when this process died
                # only comes back solo, never charged (reap.lua).
                start_now=want - got,
                isolated=bool(self.processes),
            )
            del self._claim_ids[name]  # answered: the next claim is a new one
            if claim.next_due_ms is not None:
                delta = claim.next_due_ms - claim.now_ms
                if next_due is None or delta < next_due[0]:
                    next_due = (delta, name)
            if claim.jobs:
                got += len(claim.jobs)
                self._hold(claim, sent)
        return got, next_due

    def _claim_id(self, queue: str) -> str:
        """The claim's name: kept until the claim is answered, so that a claim whose
        reply was lost is asked again under it and returns its jobs (claim.lua)."""
        if queue not in self._claim_ids:
            self._claim_seq += 1
            self._claim_ids[queue] = f"{self._claim_prefix}{self._claim_seq}"
        return self._claim_ids[queue]

    def _hold(self, claim: Claim, sent: float) -> None:
        leases = [
            _Lease(
                c,
                self._granted_lease_ms(claim, c),
                renewed_at=sent,
                claimed_at=sent,
                armed=c.job is not None and c.job.started,
                armed_at_claim=c.job is not None and c.job.started,
                solo=c.job is not None and c.job.solo,
                server_us=claim.now_ms * 1000,
            )
            for c in claim.jobs
        ]
        renew_at = min(_renewal_time(lease) for lease in leases)
        with self._work:
            for lease in leases:
                self._held[lease.key] = lease
                self._solo_held += lease.solo
            self.stats.claimed += len(leases)
            sooner = renew_at < self._renew_at
            if sooner:
                self._renew_at = renew_at
            self._ready.extend(leases)
            self._work.notify(len(leases))
        if sooner:  # a shorter lease than those held: the heartbeat must wake earlier
            self._beat_wake.set()

    def _granted_lease_ms(self, claim: Claim, claimed: Claimed) -> int:
        """The lease the claim script granted (it falls back to ours for a bad row value)."""
        deadline = claimed.job.lease_deadline if claimed.job else None
        if deadline is None or deadline <= claim.now_ms:
            return self.lease_ms
        return deadline - claim.now_ms

    def _target(self) -> int:
        """Unfinished jobs to hold: one per thread, plus read-ahead while jobs are short.

        A job running now counts as long as it has run so far once that passes the
        read-ahead budget, so a slow job stops the read-ahead at once instead of after
        it ends. A shorter run is not a sign of anything: a job waiting for the GIL
        while this thread parses a claim has "run" for milliseconds. Called with the
        lock held.
        """
        if self._avg_ms is None:
            return self.slots
        now = time.monotonic()
        running_ms = max(
            ((now - lease.started) * 1000 for lease in self._running),
            default=0.0,
        )
        if running_ms < READ_AHEAD_BUDGET_MS:
            running_ms = 0.0
        extra = int(self.slots * READ_AHEAD_BUDGET_MS / max(self._avg_ms, running_ms, 0.01))
        return self.slots + min(extra, MAX_READ_AHEAD)

    def _quota(self) -> int:
        """Jobs still allowed by max_jobs (a large number when there is no limit)."""
        if self.max_jobs is None:
            return 1 << 30
        return max(0, self.max_jobs - self.stats.claimed)

    def _held_count(self) -> int:
        with self._lock:
            return len(self._held)

    def _block(self, next_due: tuple[int, str] | None) -> None:
        """Wait on the server until a queue is woken or the next scheduled job is due.

        A server checks blocking timeouts only on its ``hz`` tick (100 ms by
        default), too coarse for a due time. So when a scheduled job is due before
        the block would end anyway, a local alarm promotes it at its time
        (``Jobs.promote``, one script call), and the promotion's wake-up ends the
        block: the job starts within a few ms of due, without a reaper.
        """
        timeout, alarm = self.idle_block_s, None
        if next_due is not None and next_due[0] / 1000 < timeout:
            wait_ms, queue = max(next_due[0], 0), next_due[1]
            timeout = max(wait_ms, 1) / 1000
            alarm = threading.Timer((wait_ms + 1) / 1000, self._promote, (queue,))
            alarm.daemon = True
            alarm.start()
        self._waiting = True
        try:
            if self._waiters is not None:
                self._waiters.wait(timeout)
                return
            blocker = self._blocking_client()
            self._blocking_since = time.monotonic()
            if not self._stopping.is_set():  # stop() may have come just before the block
                blocker.bzpopmin(self._wake_keys(), timeout)
        except redis.RedisError as exc:
            if not self._stopping.is_set():
                # Down, failed over, or refused (e.g. an ACL without BZPOPMIN): wait
                # out the timeout instead, so a broken blocking read never spins.
                logger.debug("blocking wait failed (%s); waiting %.2fs instead", exc, timeout)
                self._close_blocker()
                self._stopping.wait(timeout)
        finally:
            self._waiting = False
            self._blocking_since = None
            if alarm is not None:
                alarm.cancel()

    def _promote(self, queue: str) -> None:
        try:
            self.jobs.promote(queue, limit=100)
        except EchoMQError as exc:  # the block's own timeout still ends the wait
            logger.debug("promote at due time failed: %s", exc)

    def _wake_keys(self) -> list[str]:
        return [QueueKeys.of(q).wake for q in self.queues]

    def _blocking_client(self) -> redis.Redis:
        """A client of our own for blocking reads, whose socket times out after the block."""
        if self._blocker is None:
            self._blocker = blocking_client(
                self.jobs.connector.client,
                self._wake_keys()[0],
                socket_timeout=self.idle_block_s + BLOCK_SLACK_S,
            )
        return self._blocker

    def _interrupt_block(self) -> None:
        if self._waiters is not None:
            self._waiters.interrupt()
        blocker = self._blocker
        if blocker is not None:
            blocker.connection_pool.disconnect()

    def _close_blocker(self) -> None:
        if self._waiters is not None:
            self._waiters.close()
        blocker, self._blocker = self._blocker, None
        if blocker is not None:
            blocker.close()

    # -- executors --------------------------------------------------------------------

    def _executor(self, slot: int) -> threading.Thread:
        thread = threading.Thread(
            target=self._execute_loop, args=(slot,), name=f"echomq-exec-{slot}", daemon=True
        )
        thread.start()
        return thread

    def _execute_loop(self, slot: int) -> None:
        while True:
            lease = self._take()
            if lease is None:
                return
            try:
                if self._stopping.is_set() or not self._mark_started(lease):
                    self._release(lease)
                elif lease.lost:
                    self._discard(lease)
                else:
                    self._process(lease, slot)
            except BaseException:  # never lose an executor thread; the reaper recovers the job
                logger.exception("job %s: the worker failed while finishing it", lease.claimed.id)
                self._forget(lease)
            finally:
                if self._solo is lease:
                    with self._work:
                        self._solo = None
                        self._work.notify_all()
            if lease.abandoned:  # its slot went to a new thread while this one was stuck
                return

    def _take(self) -> _Lease | None:
        """The next claimed job to run, in claim order; None when the worker closes.

        A solo job runs in a child process of its own when the handler can go to
        one (then one solo job at a time); else it waits until nothing else runs
        here, and nothing starts beside it: if this process dies now, the crash is
        its own (reap.lua charges it alone).
        """
        while True:
            with self._lock:  # the plain lock, not the Condition's wrapper: every job's path
                lease = self._next_ready()
                if lease is not None:
                    return lease
                closing, flush = self._closing and not self._ready, bool(self._outbox)
            if closing:
                return None
            if flush and not self._ready:  # about to wait: nothing may sit in the outbox
                self._flush()
                continue
            with self._work:
                if self._next_ready_blocked():
                    self._work.wait(0.5)

    def _next_ready(self) -> _Lease | None:
        """Pop the lease to run next, if one may start now. Called with the lock held."""
        ready = self._ready
        while ready:
            lease = ready[0]
            if lease.released:
                ready.popleft()  # given back meanwhile (_give_back_stuck)
                continue
            if self._solo is not None and (lease.solo or not self._runner.can_isolate):
                return None  # a solo job runs: nothing else starts (no child), or no second one
            if lease.solo and self._running and not self._runner.can_isolate:
                return None  # it must run alone in this process: wait for the others
            ready.popleft()
            if lease.solo:
                self._solo = lease
            lease.started = time.monotonic()  # give-back leaves it alone now
            self._running.add(lease)
            renew = lease.renewed_at + CANCEL_CHECK_S  # a running job is checked every second
            if renew < self._renew_at:
                self._renew_at = renew
            if self._fetcher_waiting and self._room_for_batch():
                self._room.notify_all()
            return lease
        return None

    def _next_ready_blocked(self) -> bool:
        """Nothing may start now and the worker is not closing: wait. Lock held."""
        return not self._closing and not (self._ready and self._next_ready_peek())

    def _next_ready_peek(self) -> bool:
        lease = self._ready[0]
        if lease.released:
            return True
        if self._solo is not None and (lease.solo or not self._runner.can_isolate):
            return False
        return not (lease.solo and self._running and not self._runner.can_isolate)

    def _mark_started(self, lease: _Lease) -> bool:
        """Tell the server this job's run begins, before it runs. The claim did it for
        every job but a solo one (marked here, alone, once nothing else runs beside it).
        False: it could not be told (shutdown gave up); do not run it."""
        if lease.armed or lease.claimed.job is None:  # a corrupt row runs no task
            return True
        items = [(lease.claimed.queue, lease.claimed.id, lease.claimed.token)]
        isolated = bool(self.processes) or (lease.solo and self._runner.can_isolate)

        def start() -> list[object]:
            return self.jobs.start_many(self.id, items, isolated=isolated)

        try:
            (reply,) = self._call_server("start", start)
        except ServerUnavailable:
            return False  # unmarked: the reaper returns it free
        if isinstance(reply, Exception):  # StaleToken: someone else holds it now
            lease.lost = str(reply)
        else:
            lease.armed = True
        return True

    def _process(self, lease: _Lease, slot: int) -> None:
        lease.begin_run(self.id)  # now: marking it may have taken a round trip
        lease.slot = slot
        try:
            outcome = self._runner.run(
                slot, lease.key, lease.claimed, lease.solo, self._time_limit(lease)
            )
        except (TimeLimitExceeded, Cancelled) as exc:  # a soft stop landing as the run ended
            outcome = stopped_failure(type(exc), "stopped as it ended")
        elapsed_ms = lease.elapsed_ms = (time.monotonic() - lease.started) * 1000
        self._avg_ms = elapsed_ms if self._avg_ms is None else 0.8 * self._avg_ms + 0.2 * elapsed_ms
        if type(outcome) is Success and not (
            lease.abandoned or lease.lost or lease.released or lease.cancelled
        ):  # the common case first: this is every job's path
            self._complete_later(lease, outcome.result)
        elif lease.abandoned:
            self._log_job(
                lease, "finally returned after it was abandoned; outcome discarded", outcome="late"
            )
        elif lease.lost or lease.released:
            self._discard(lease)
        elif lease.cancelled and not isinstance(outcome, Success):
            self._fail(lease, stopped_failure(Cancelled, lease.cancelled))
        elif isinstance(outcome, Crashed):
            self._crashed(lease, outcome)
        elif isinstance(outcome, Success):
            self._complete_later(lease, outcome.result)
        else:
            self._fail(lease, outcome)

    def _time_limit(self, lease: _Lease) -> float:
        """Seconds the run may take (0: no limit): the job's own, capped by the worker's."""
        own = lease.claimed.job.timeout_ms / 1000 if lease.claimed.job else 0.0
        cap = self.time_limit_s
        if own and cap:
            return min(own, cap)
        return own or cap

    def _crashed(self, lease: _Lease, crash: Crashed) -> None:
        """Its process died under it. Alone in it: the job's own crash, charged now (no
        lease to wait out). Beside others, or killed by us for another job's limit:
        released at once, free (solo if it may have been the cause)."""
        lease.finishing = True
        with self._lock:
            self._running.discard(lease)
        if not crash.alone:
            self._log_job(lease, crash.why, outcome="released")
            self._release(lease, solo=not crash.ours)
            return
        try:
            outcome = self._call_server(
                "crashed",
                lambda: self.jobs.crashed(
                    lease.claimed.queue,
                    lease.claimed.id,
                    lease.claimed.token,
                    why=crash.why.replace('"', "'"),
                    crash_budget=self.crash_budget,
                    ran_us=lease.ran_us(),
                ),
            )
        except StaleToken as exc:
            self._log_job(
                lease, f"crashed ({crash.why}) but its lease was lost ({exc})", outcome="lost"
            )
        except ServerUnavailable:
            pass  # shutdown gave up: the reaper returns it after the lease
        else:
            self._count("dead" if outcome.state == "dead" else "retried")
            self._log_job(
                lease,
                f"{crash.why}; {outcome.state} after {outcome.due_ms} crash(es)",
                outcome="crashed",
            )
        self._forget(lease)

    def _abandon(self, key: tuple[str, str, int], failure: Failure) -> None:
        """A run in a thread outlived its soft stop (stuck in C code): record its failure
        now and give its slot to a new thread; the stuck one ends when the call returns."""
        with self._lock:
            lease = self._held.get(key)
        if lease is None or lease.finishing:
            return
        lease.abandoned = True
        logger.error(
            "job %s %s: %s; its thread is stuck", lease.claimed.id, lease.task, failure.summary
        )
        self._fail(lease, failure)
        self._executor(lease.slot)

    def _complete_later(self, lease: _Lease, result: str) -> None:
        """Queue the completion. Nothing else waiting locally: flush now (the result
        is reported at once). Else the heartbeat flushes it when the batch is due, so
        this executor goes on to its next job instead of waiting for the round trip."""
        lease.finishing = True
        now = time.monotonic()
        with self._lock:
            self._running.discard(lease)
            started_batch = not self._outbox
            if started_batch:
                self._outbox_since = now
            self._outbox.append((lease, result))
            due = self._flush_due(now)
        if not self._ready:
            self._flush()
        elif started_batch or due:
            self._beat_wake.set()

    def _flush_due(self, now: float) -> bool:
        return bool(self._outbox) and (
            len(self._outbox) >= FLUSH_MAX or now - self._outbox_since >= FLUSH_AGE_S
        )

    def _flush(self, *, patient: bool = True) -> None:
        """Send the queued completions in one round trip (one complete call per queue).

        ``patient`` (executors) rides out an outage here; the heartbeat is not
        patient: it puts the batch back and goes on renewing leases.
        """
        with self._lock:
            batch, self._outbox = self._outbox, []
            self._flushing += len(batch)
        if not batch:
            return
        try:
            self._send_completions(batch, patient)
        finally:
            with self._lock:
                self._flushing -= len(batch)

    def _send_completions(self, batch: list[tuple[_Lease, str]], patient: bool) -> None:
        items = [(le.claimed.queue, le.claimed.id, le.claimed.token, res) for le, res in batch]
        ran_us = [le.ran_us() for le, _ in batch]

        def send() -> list[object]:  # the job events so far ride along (none of this batch's)
            return self.jobs.complete_many(items, ran_us=ran_us, riders=self.events.take())

        try:
            replies = self._call_server("complete", send) if patient else send()
        except Exception as exc:
            if not patient and isinstance(exc, ServerUnavailable):
                self._server_down("complete", exc)
                with self._lock:
                    self._outbox[:0] = batch
                return
            if not isinstance(exc, ServerUnavailable):  # else shutdown's grace gave up
                logger.exception("completing %d job(s) failed", len(batch))
            # The reaper returns them after their lease.
            self._forget(*(lease for lease, _ in batch))
            return
        completed, not_run = 0, []
        for (lease, result), reply in zip(batch, replies):
            if isinstance(reply, ServerUnavailable):  # refused unrun (READONLY, TRYAGAIN)
                not_run.append((lease, result))
                continue
            if isinstance(reply, StaleToken):
                self._count("stale")
                self._log_job(lease, f"finished, not completed ({reply})", outcome="lost")
            elif isinstance(reply, Exception):
                self._log_job(lease, f"not completed: {reply!r}", logging.ERROR, outcome="error")
            else:
                completed += 1
                self._log_job(lease, "", logging.INFO, outcome="completed")
        with self._lock:
            self.stats.completed += completed
            if not_run:  # sent again with the next flush, in FLUSH_AGE_S
                if not self._outbox:
                    self._outbox_since = time.monotonic()
                self._outbox[:0] = not_run
        resend = {lease.key for lease, _ in not_run}
        self._forget(*(lease for lease, _ in batch if lease.key not in resend))

    def _fail(self, lease: _Lease, failure: Failure) -> None:
        lease.finishing = True
        with self._lock:
            self._running.discard(lease)
        claimed = lease.claimed
        used = claimed.token - (claimed.job.refunds if claimed.job else 0)
        backoff = failure.backoff_ms
        if backoff is None:
            backoff = self.retry_policy.backoff_ms(used)
        try:
            outcome = self._call_server(
                "retry",
                lambda: self.jobs.retry(
                    claimed.queue,
                    claimed.id,
                    claimed.token,
                    error=_as_error_object(failure.error, failure.summary),
                    summary=summary_line(failure.summary),
                    backoff_ms=backoff,
                    give_up=not failure.retry,
                    ran_us=lease.ran_us(),
                ),
            )
        except StaleToken as exc:
            self._count("stale")
            self._log_job(lease, f"failed, lease lost ({exc})", outcome="lost", failure=failure)
        except ServerUnavailable:
            pass  # shutdown gave up: the reaper returns it after the lease
        else:
            if outcome.state == "dead":
                self._count("dead")
                self._log_job(lease, "", logging.ERROR, outcome="dead", failure=failure)
            else:
                self._count("retried")
                wait = backoff if outcome.state == "scheduled" else 0
                self._log_job(lease, "", outcome="retried", failure=failure, retry_in_ms=wait)
        self._forget(lease)

    def _discard(self, lease: _Lease) -> None:
        if lease.lost:
            self._log_job(lease, f"lease lost ({lease.lost})", outcome="discarded")
        else:
            self._log_job(lease, "released at shutdown", outcome="discarded")
        self._forget(lease)

    def _forget(self, *leases: _Lease) -> None:
        """Let go of held jobs; the fetcher is woken once, not once per job."""
        with self._room:
            self._running.difference_update(leases)
            gone = [lease for lease in leases if self._held.pop(lease.key, None) is not None]
            self._solo_held -= sum(lease.solo for lease in gone)
            if gone:
                self._room.notify_all()

    def _log_job(
        self,
        lease: _Lease,
        what: str,
        level: int = logging.WARNING,
        *,
        outcome: str,
        failure: Failure | None = None,
        retry_in_ms: int | None = None,
    ) -> None:
        """One job event line (engine/events.py), and the event for the queue's stream. A
        failure's traceback goes with it unless the Django layer ended the task (``retry``
        False): its logger printed it then. An operator's cancel ends it "cancelled"."""
        claimed = lease.claimed
        job = claimed.job
        if outcome == "dead" and lease.cancelled:
            outcome = "cancelled"
        log_job(
            level,
            job_id=claimed.id,
            task=lease.task,
            queue=claimed.queue,
            attempt=claimed.token - (job.refunds if job else 0),
            max_attempts=job.max_attempts if job else 0,
            duration_ms=lease.elapsed_ms,
            outcome=outcome,
            worker=self.id,
            error=failure.summary if failure else "",
            retry_in_ms=retry_in_ms,
            detail=what,
            traceback=failure_traceback(failure.error) if failure and failure.retry else "",
            events=self.events,
        )

    def _announce_runs(self, now: float) -> None:
        """A run that lasts: its start is an event, seen by the heartbeat (no log line: one
        per outcome). A run shorter than STAMP_AFTER_S has none: its outcome's event, with
        its duration, says it ran, and the hot path adds one event per job, not two."""
        with self._lock:
            due = [
                lease
                for lease in self._running
                if not lease.announced and lease.started and now - lease.started >= STAMP_AFTER_S
            ]
            for lease in due:
                lease.announced = True
        for lease in due:
            claimed, job = lease.claimed, lease.claimed.job
            attempt = claimed.token - (job.refunds if job else 0)
            most = job.max_attempts if job else 0
            values = ("started", claimed.id, lease.task, attempt, most, 0, self.id, "", "", "")
            self.events.add(claimed.queue, values)

    def _send_events(self) -> None:
        """The job events no completion carried, in a round trip of their own (heartbeat,
        shutdown). Lost with the server: a log for watching, not a record to keep."""
        calls = self.events.take()
        if calls:
            try:
                self.jobs.connector.run_many(calls)
            except EchoMQError as exc:
                logger.debug("job events not sent: %s", exc)

    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self.stats, name, getattr(self.stats, name) + 1)

    # -- heartbeat ----------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        next_registry = 0.0
        while not self._beat_done.is_set():
            now = time.monotonic()
            try:
                retry_soon = not self._renew_due(now)
            except Exception:  # this thread keeps every lease alive: it must not die
                logger.exception("renewing leases failed")
                retry_soon = True
            if self._flush_due(now):
                self._flush(patient=False)  # results of short jobs wait on no slow one
            self._announce_runs(now)
            if self.events.due(now):
                self._send_events()
            watch_in = self._runner.watch(now)
            self._give_back_stuck(now)
            if now >= next_registry:
                self._beat_registry()
                next_registry = now + self.registry_interval_s
            self._watchdog(now)
            wait = min(self._next_renewal(now, next_registry), watch_in)
            self._beat_wake.wait(0.1 if retry_soon else wait)
            self._beat_wake.clear()

    def _renew_due(self, now: float) -> bool:
        """Extend every lease past a third of its length. False if the server was unreachable."""
        with self._lock:
            if now < self._renew_at:
                return True
            due, self._renew_at = [], math.inf
            for lease in self._held.values():
                if not (lease.lost or lease.released):
                    at = _renewal_time(lease)
                    if at <= now:
                        due.append(lease)
                    elif at < self._renew_at:
                        self._renew_at = at
            # A run going on for a while gets its start time on the server now, not at
            # its end: its result shows when it started while it runs.
            for lease in self._running:
                if lease not in due and not lease.stamped and not lease.lost:
                    at = lease.started + STAMP_AFTER_S
                    if at <= now:
                        due.append(lease)
                    elif at < self._renew_at:
                        self._renew_at = at
        if not due:
            return True
        try:
            self._extend(due)
        except ServerUnavailable:
            return False
        finally:  # renewed: a third of a lease on; refused or unsent: at once, on the next beat
            with self._lock:
                self._renew_at = min(
                    [self._renew_at, *(_renewal_time(le) for le in due if not le.lost)]
                )
        return True

    def _extend(self, due: list[_Lease]) -> None:
        sent = time.monotonic()
        items = [(le.claimed.queue, le.claimed.id, le.claimed.token, le.lease_ms) for le in due]
        ran_us = [le.ran_us() if le in self._running else -1 for le in due]
        try:
            replies = self.jobs.extend_many(items, ran_us=ran_us)
        except ServerUnavailable as exc:
            self._server_down("extend", exc)
            raise
        for lease, reply, us in zip(due, replies, ran_us):
            if isinstance(reply, CancelRequested):
                if not (lease.cancelled or lease.finishing):
                    lease.cancelled = str(reply) or "cancelled by an operator"
                    logger.warning("job %s %s: cancelled (%s); stopping it", lease.claimed.id,
                                   lease.task, lease.cancelled)  # fmt: skip
                    self._runner.stop(lease.key, Cancelled)
            elif isinstance(reply, StaleToken):
                if not lease.finishing:  # a finished job's complete may simply have won the race
                    lease.lost = str(reply)
                    self._count("lost")
                    logger.warning(
                        "job %s %s: lease lost (%s); the task keeps running but its outcome "
                        "will be discarded",
                        lease.claimed.id,
                        lease.task,
                        reply,
                    )
            elif isinstance(reply, Exception):
                logger.error("job %s: extend failed: %r", lease.claimed.id, reply)
            else:
                lease.renewed_at = sent
                lease.stamped = lease.stamped or us >= 0

    def _next_renewal(self, now: float, next_registry: float) -> float:
        with self._lock:
            due = [self._renew_at, next_registry, now + 1.0]
            if self._outbox:
                due.append(self._outbox_since + FLUSH_AGE_S)
            if self.events.since:
                due.append(self.events.since + EVENTS_AGE_S)
            if self._running:  # runs past STAMP_AFTER_S are announced within about this
                due.append(now + EVENTS_AGE_S)
        return max(0.005, min(due) - now)

    def _give_back_stuck(self, now: float) -> None:
        """Release read-ahead jobs stuck behind a slow one, so another worker runs them.

        Read-ahead is sized by the average duration, which cannot know that the
        next job is slow; without this, short jobs would sit leased here, unrun,
        for as long as the slow one takes.
        """
        if now < self._next_give_back_check:
            return
        self._next_give_back_check = now + GIVE_BACK_CHECK_S
        with self._lock:
            stuck = [
                lease
                for lease in self._held.values()
                if not (lease.started or lease.released or self._stopping.is_set())
                and now - lease.claimed_at > READ_AHEAD_GIVE_BACK_S
            ]
            for lease in stuck:
                lease.released = True  # an executor that picks it up skips it
        if stuck:
            logger.info("giving back %d job(s) waiting behind a slow one", len(stuck))
            self._release(*stuck)

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

    def _watchdog(self, now: float) -> None:
        """Cut a blocking read that outlived its own timeout (a half-open connection)."""
        since = self._blocking_since
        if since is not None and now - since > self.idle_block_s + 2 * BLOCK_SLACK_S:
            logger.warning("a blocking read hung for %.1fs; reconnecting", now - since)
            self._interrupt_block()

    # -- shutdown -----------------------------------------------------------------------

    def _release_waiting(self) -> None:
        """Give back at once the jobs claimed but not started (they are someone else's now)."""
        with self._lock:
            waiting = [lease for lease in self._ready if not lease.released]
            self._ready.clear()
        if waiting:
            self._release(*waiting)

    def _drain(self) -> bool:
        """Wait for held jobs to finish: for ever in burst/max_jobs runs, else the grace time."""
        with self._room:
            while self._held:
                if self._stopping.is_set():
                    left = self._stop_time + self.grace_s - time.monotonic()
                    if left <= 0:
                        return False
                    self._room.wait(min(left, 0.2))
                else:
                    self._room.wait(0.2)
        return True

    def _end_running(self) -> None:
        """The grace time is over and jobs still run. Never release a job whose task may
        still run (another worker would start it beside): in process mode the children
        running them are killed first, then the jobs released; in thread mode a thread
        cannot be killed, so they are left to the reaper, which returns them once this
        process is gone and their leases run out."""
        with self._lock:
            leases = [lease for lease in self._held.values() if not lease.finishing]
        if not leases:
            return
        if self.processes:
            logger.warning(
                "grace time over: killing the children of %d running job(s)", len(leases)
            )
            self._runner.kill_running()
            self._release(*leases)
        else:
            logger.warning(
                "grace time over: %d job(s) still running; the reaper returns them after "
                "their lease",
                len(leases),
            )
            for lease in leases:
                lease.released = True  # their outcome, if it comes, is not for us to send

    def _release(self, *leases: _Lease, solo: bool = False) -> None:
        """Give jobs back to pending, refunded, in one round trip (a read-ahead of up to
        MAX_READ_AHEAD jobs at shutdown, or stuck behind a slow one)."""
        for lease in leases:
            lease.released = True
        items = [(le.claimed.queue, le.claimed.id, le.claimed.token) for le in leases]
        try:
            replies = self.jobs.release_many(items, solo=solo)
        except ServerUnavailable as exc:
            logger.warning("could not release %d job(s) (%s); the reaper will", len(leases), exc)
            replies = []
        released = 0
        for lease, reply in zip(leases, replies):
            if isinstance(reply, StaleToken):
                continue  # lost already: its new holder has it
            if isinstance(reply, Exception):
                logger.warning(
                    "job %s: could not release it (%s); the reaper will", lease.claimed.id, reply
                )
            else:
                released += 1
                logger.info("job %s %s released back to pending", lease.claimed.id, lease.task)
        with self._lock:
            self.stats.released += released
        self._forget(*leases)

    # -- riding out outages -------------------------------------------------------------

    def _call_server(self, what: str, call: Callable[[], object]):
        """Run ``call``, retrying with backoff while the server is unreachable.

        Gives up (raising ServerUnavailable) only when shutdown's grace is over.
        """
        delay = 0.05
        while True:
            try:
                result = call()
            except ServerUnavailable as exc:
                self._server_down(what, exc)
                if self._abandoned.wait(delay):
                    raise
                delay = min(delay * 2, MAX_BACKOFF_S)
            else:
                self._server_up()
                return result

    def _server_down(self, what: str, exc: Exception) -> None:
        now = time.monotonic()
        with self._lock:
            if self._down_since is None:
                self._down_since = now
                logger.warning("lost the server during %s (%s); retrying with backoff", what, exc)
            down_for = now - self._down_since
        if what == "claim":  # the fetcher backs off here; other callers have their own loops
            self._stopping.wait(min(MAX_BACKOFF_S, 0.1 + down_for / 4))

    def _server_up(self) -> None:
        if self._down_since is None:
            return
        with self._lock:
            since, self._down_since = self._down_since, None
        if since is not None:
            logger.warning("the server is back after %.1fs", time.monotonic() - since)


def blocking_client(
    client: redis.Redis | redis.RedisCluster, key: str, *, socket_timeout: float
) -> redis.Redis:
    """A one-connection client like ``client`` (for ``key``'s node on a cluster).

    Blocking reads get their own connection so they never hold one that scripts
    need, and a socket timeout just above the block timeout, so a read that a
    failover left hanging fails instead of waiting for ever.
    """
    if isinstance(client, redis.RedisCluster):
        node = client.get_node_from_key(key)
        pool = node.redis_connection.connection_pool
    else:
        pool = client.connection_pool
    kwargs = dict(pool.connection_kwargs)
    kwargs.update(socket_timeout=socket_timeout, retry=Retry(NoBackoff(), 0))
    return redis.Redis(
        connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
    )


class _QueueWaiters:
    """The idle wait on a cluster: a thread per queue blocks on that queue's wake key.

    One BZPOPMIN over the wake keys of several queues is a CROSSSLOT error on a
    cluster (each queue is its own slot), so each queue gets a thread with its own
    connection to the queue's node, and ``wait`` returns as soon as any of them is
    woken: pick-up stays as fast as one blocking call on a single server.

    The threads block only while the fetcher waits. A wake-up one of them still
    takes after the fetcher went back to work is given back (ZADD) for another idle
    worker, since this busy one would sit on it, which a standalone worker never does.
    """

    def __init__(self, client: redis.RedisCluster, queues: Sequence[str], socket_timeout: float):
        self._client = client
        self._keys = [QueueKeys.of(q).wake for q in queues]
        self._socket_timeout = socket_timeout  # the block time plus slack: a hung read fails
        self._block_s = 0.0
        self._idle = threading.Event()  # the fetcher is waiting: the threads block
        self._woken = threading.Event()  # a wake key was popped while it waited
        self._closed = threading.Event()
        self._blockers: dict[str, redis.Redis] = {}
        self._threads: list[threading.Thread] = []

    def wait(self, timeout: float) -> None:
        """Return when one of the queues is woken, on ``interrupt``, or after ``timeout``."""
        if not self._threads:
            self._threads = [
                threading.Thread(
                    target=self._watch, args=(key,), name=f"echomq-wait-{i}", daemon=True
                )
                for i, key in enumerate(self._keys)
            ]
            for thread in self._threads:
                thread.start()
        self._block_s = timeout
        self._idle.set()
        self._woken.wait(timeout)
        self._idle.clear()
        self._woken.clear()  # the fetcher claims from every queue next: nothing is missed

    def interrupt(self) -> None:
        """End a ``wait`` now (a stop): wake the fetcher and cut the blocking reads."""
        self._woken.set()
        for blocker in self._blockers.copy().values():  # copy(): atomic, threads add to it
            blocker.connection_pool.disconnect()

    def close(self) -> None:
        self._closed.set()
        self._idle.set()  # threads waiting for the next idle period see the close
        self.interrupt()
        for thread in self._threads:
            thread.join(1.0)

    def _watch(self, key: str) -> None:
        while self._idle.wait() and not self._closed.is_set():
            try:
                self._wait_once(key)
            except Exception as exc:  # this thread is the queue's wake-up: it must not die
                if self._closed.is_set():
                    break
                logger.debug("blocking wait on %s failed (%s); retrying", key, exc)
                self._drop(key)
                if isinstance(exc, redis.exceptions.MovedError):
                    # Resharded or failed over: the server ended the read naming the new
                    # owner. Learn it and block there (after a breath: never spin).
                    self._client.nodes_manager.move_slot(exc)
                    self._closed.wait(0.05)
                else:
                    # Down: reconnect after a while; meanwhile the fetcher's own timeout
                    # still ends its waits, so the queue is not stuck.
                    self._closed.wait(self._socket_timeout)
        self._drop(key)

    def _drop(self, key: str) -> None:
        blocker = self._blockers.pop(key, None)
        if blocker is not None:
            blocker.close()

    def _wait_once(self, key: str) -> None:
        if key not in self._blockers:
            self._blockers[key] = blocking_client(
                self._client, key, socket_timeout=self._socket_timeout
            )
        blocker = self._blockers[key]
        popped = blocker.bzpopmin([key], max(self._block_s, 0.001))
        if popped is None:
            return
        if self._idle.is_set():
            self._woken.set()
        else:
            _, member, score = popped
            blocker.zadd(key, {member: score})


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")


__all__ = [
    "Failure",
    "Handler",
    "Outcome",
    "Success",
    "Worker",
    "WorkerStats",
    "blocking_client",
    "error_json",
    "failure_from_exception",
]
