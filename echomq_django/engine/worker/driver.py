"""What an executor does besides running jobs: it drives the worker's wire.

Between two jobs (``between_jobs``) an executor reads the replies that have come,
sends the completions that are due and, when the read-ahead runs low, starts the
next claim round, all without waiting. With nothing to run (``find_work``) it sends
what finished, waits for the claims in flight, and when the queues it may claim
from are empty, waits on the server (one executor at a time; the others wait for a
job). So no thread of its own claims and completes: a worker running short jobs does
its I/O on the thread that runs them and never waits for a round trip while there is
work. The heartbeat drives the wire only while every executor is busy (``keep_up``).

A bug met on the way (not an outage) stops the worker with its reason.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable

from .claims import Claims
from .completions import Completions
from .config import WorkerConfig
from .ledger import Ledger
from .waiting import IdleWait
from .wire import Wire

logger = logging.getLogger("echomq.worker")

WAIT_S = 0.5  # the longest an idle executor waits before it looks again
# Between jobs, the wire is looked at no more often than this: a look costs a system
# call or two, and a job of a few µs would pay it each time for a reply that takes a
# fraction of a ms to come. (A claim is sent long before its jobs are needed.)
LOOK_EVERY_S = 0.0002
LEFT_OUT_BLOCK_S = 0.5  # the longest idle wait on the server while a full share is left out


class Next(enum.Enum):
    """What an executor with nothing to run does next."""

    GO = "a job may start"
    WAIT = "wait for a job, a slot, or another executor"
    IDLE = "the queues are empty: wait on the server"
    BACK_OFF = "the server refused a claim: wait before the next"
    DONE = "the worker is done (a burst, max_jobs)"


class Driver:
    def __init__(
        self,
        wire: Wire,
        claims: Claims,
        completions: Completions,
        ledger: Ledger,
        idle: IdleWait,
        *,
        config: WorkerConfig,
        stopping: threading.Event,
        done: threading.Event,
        on_fatal: Callable[[str], None],
    ) -> None:
        self._wire = wire
        self._claims = claims
        self._completions = completions
        self._ledger = ledger
        self._idle = idle
        self._config = config
        self._stopping = stopping
        self._done = done  # set once there is nothing more to do (burst, max_jobs)
        self._on_fatal = on_fatal
        self._idler_lock = threading.Lock()
        self.idling = False  # an executor waits on the server
        self.driven_at = 0.0  # monotonic: when an executor last drove the wire

    @property
    def pending(self) -> bool:
        """Something on the wire waits for a driver: completions to send, replies to read."""
        return self._completions.waiting or bool(self._wire.waiting_since)

    def between_jobs(self) -> None:
        """The wire's I/O after a job, without waiting (skipped if another thread has it,
        or if it was done less than LOOK_EVERY_S ago)."""
        now = time.monotonic()
        if now - self.driven_at >= LOOK_EVERY_S and self._wire.lock.acquire(blocking=False):
            self.driven_at = now
            try:
                self._guarded(self._feed)
            finally:
                self._wire.lock.release()

    def keep_up(self) -> None:
        """The heartbeat's turn, while every executor is busy: read what came (claims'
        leases must be held to be renewed), send the completions that are due."""
        if self._wire.lock.acquire(blocking=False):
            try:
                self._guarded(self._wire.pump)
                self._guarded(self._completions.send)
            finally:
                self._wire.lock.release()

    def find_work(self) -> bool:
        """Nothing may start here now: bring work, or wait for it. False: the executor
        stops (the worker is done, or closing with nothing left to start)."""
        if self._ledger.closed or self._done.is_set():
            return False
        if self.idling or not self._wire.lock.acquire(blocking=False):
            self._ledger.wait_for_work(WAIT_S)  # another thread drives: it brings the work
            return True
        try:
            self.driven_at = time.monotonic()
            then = self._guarded(self._fetch) or Next.WAIT
        finally:
            self._wire.lock.release()
        if then is Next.IDLE:
            self._guarded(self._wait_on_server)
        elif then is Next.BACK_OFF:
            self._stopping.wait(max(0.0, self._claims.retry_at - time.monotonic()))
        elif then is Next.DONE:
            self._done.set()
            return False
        elif then is Next.WAIT:
            self._ledger.wait_for_work(WAIT_S)
        return True

    def _feed(self) -> None:
        self._wire.pump()
        self._completions.send()
        self._claim_if_room()

    def _claim_if_room(self) -> None:
        claims = self._claims
        if claims.current is None and not self._stopping.is_set():
            wants = (
                self._ledger.wants(claims.quota()) if time.monotonic() >= claims.retry_at else {}
            )
            if wants:
                claims.start(wants)

    def _fetch(self) -> Next:
        """With the wire: send what finished (nothing runs next here), claim if there is
        room, and wait for the replies in flight until a job may start (a completion's
        reply lets its lease go: room to claim, or the end of a solo job's wait)."""
        claims, ledger, wire = self._claims, self._ledger, self._wire
        self._completions.send(everything=True)
        asked = claims.current  # the round this call waits for (at most one begun here)
        while True:
            if asked is None:
                self._claim_if_room()
                asked = claims.current
            if ledger.startable() or not wire.waiting_since:
                break
            wire.pump(wait=True)
        if ledger.startable():
            return Next.GO
        if self._stopping.is_set():
            return Next.WAIT
        if claims.quota() == 0 and ledger.held_count() == 0:
            return Next.DONE  # max_jobs: all claimed and ended
        if time.monotonic() < claims.retry_at:
            return Next.BACK_OFF
        if asked is None or claims.last is not asked or asked.got:
            return Next.WAIT  # no room to claim (or a solo job waits), or jobs came
        # The queues asked were empty.
        if not self._config.burst:
            return Next.IDLE
        if asked.held_before == 0 and ledger.held_count() == 0:
            logger.info("burst: the queues are empty and nothing is running")
            return Next.DONE
        return Next.WAIT  # burst with jobs still running: they may retry into pending

    def _wait_on_server(self) -> None:
        """Block on the server until an enqueue wakes the queues that had room (one
        executor at a time: the others wait for the jobs it brings)."""
        with self._idler_lock:
            if self.idling:
                waiting_for_it = True
            else:
                self.idling, waiting_for_it = True, False
        if waiting_for_it:
            self._ledger.wait_for_work(WAIT_S)
            return
        try:
            asked = self._claims.last
            assert asked is not None
            shares = self._ledger.shares
            if len(asked.wants) == len(shares):
                self._idle.block(asked.next_due)
                return
            # A full share's wake-up is for another worker; one left out that gets room
            # cuts the wait. A cut that lands just before the blocking command is sent
            # cannot stop it: the wait is kept short, so a full share's next job waits
            # at most this long.
            self._ledger.blocking({s for s in shares if s not in asked.wants}, self._idle.cut)
            queues = [q for q in self._config.queues if self._ledger.share_of(q) in asked.wants]
            self._idle.block(asked.next_due, queues, at_most_s=LEFT_OUT_BLOCK_S)
        finally:
            self.idling = False

    def _guarded(self, step: Callable[[], Next | None]) -> Next | None:
        """``step()``; a bug in it stops the worker, with the reason (the held jobs are
        given back or returned by the reaper: nothing is lost), instead of ending the
        executor thread that met it and leaving its slot empty."""
        try:
            return step()
        except Exception as exc:
            logger.exception("claiming, completing or waiting failed; stopping the worker")
            self._on_fatal(f"claiming, completing or waiting failed: {type(exc).__name__}: {exc}")
            return None
