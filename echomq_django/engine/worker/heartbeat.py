"""The heartbeat: the thread that keeps every held lease alive.

It renews each lease at a third of its length (``Jobs.extend_many``, one call,
token-fenced), and a running job's at least every second, which is how a cancel
reaches it. It also sends completions that waited over FLUSH_AGE_S, enforces time
limits (``Runner.watch``), gives back read-ahead jobs stuck behind a slow one,
refreshes the worker registry and cuts a hung blocking read. A task holding the
GIL in one long C call starves it: a worker that must not be starved runs its
tasks in supervised children, whose leases their supervisor renews (``keeper``);
a supervised child's heartbeat renews nothing and registers nothing.

A lease the heartbeat finds lost (``StaleToken``: reaped, then claimed by someone
else) is logged as such, apart from task failures, and its outcome is discarded:
the worker never completes a job over its new holder; the fence would refuse it
anyway.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from ..errors import Cancelled
from ..events import EVENTS_AGE_S, EventLog
from ..jobs import Jobs
from ..outage import Outage
from .alarm import Alarm
from .completions import Completions
from .driver import Driver
from .endings import Endings
from .lease import STAMP_AFTER_S, Lease
from .ledger import Ledger
from .renewal import renew, send_events
from .running import Runner
from .stats import Tally

logger = logging.getLogger("echomq.worker")

GIVE_BACK_CHECK_S = 0.05  # how often the heartbeat looks for stuck read-ahead jobs
# While jobs are held, the heartbeat looks this often whether the executors drive the
# wire: if none did for this long (every one is busy), it sends the completions due and
# reads the replies that came (a claim's leases must be held to be renewed).
KEEP_UP_S = 0.02


class Heartbeat:
    def __init__(
        self,
        jobs: Jobs,
        ledger: Ledger,
        runner: Runner,
        completions: Completions,
        endings: Endings,
        alarm: Alarm,
        tally: Tally,
        outage: Outage,
        driver: Driver,
        *,
        stopping: threading.Event,
        renews: bool,
        registry: Callable[[], None] | None,
        registry_interval_s: float,
        watchdog: Callable[[float], None],
        events: EventLog,
        worker_id: str,
    ) -> None:
        self._jobs = jobs
        self._events = events
        self._worker_id = worker_id
        self._ledger = ledger
        self._runner = runner
        self._completions = completions
        self._driver = driver  # drives the wire while the executors are busy
        self._endings = endings
        self._alarm = alarm
        self._tally = tally
        self._outage = outage
        self._stopping = stopping
        self._renews = renews  # False: a supervisor renews the leases
        self._registry = registry  # refresh this worker's registry entry (None: not ours)
        self._registry_interval_s = registry_interval_s
        self._watchdog = watchdog  # cut a hung blocking read
        self._done = threading.Event()
        self._next_give_back_check = 0.0
        self._thread = threading.Thread(target=self._loop, name="echomq-heartbeat", daemon=True)

    def start(self) -> None:
        """The worker's registry entry is written first (before anything is claimed),
        then the beats begin."""
        if self._registry is not None:
            self._registry()
        self._thread.start()

    def stop(self, deadline: float = math.inf) -> None:
        """End the beats; a beat stuck on a half-open connection is waited for no
        longer than ``deadline`` (monotonic): the thread is a daemon."""
        self._done.set()
        self._alarm.wake_up.set()
        self._thread.join(max(0.25, min(5.0, deadline - time.monotonic())))
        self._send_events()  # the last ones no completion carried

    def _loop(self) -> None:
        next_registry = time.monotonic() + self._registry_interval_s
        while not self._done.is_set():
            now = time.monotonic()
            retry_soon = False
            try:
                self._renew_due(now)
            except Exception:  # this thread keeps every lease alive: it must not die
                logger.exception("renewing leases failed")
                retry_soon = True
            if self._driver.pending and now - self._driver.driven_at >= KEEP_UP_S:
                self._driver.keep_up()  # short jobs' results wait on no slow one
            if self._events.due(now):
                self._send_events()
            watch_in = self._runner.watch(now)
            self._give_back_stuck(now)
            if now >= next_registry and self._registry is not None:
                self._registry()
                next_registry = now + self._registry_interval_s
            self._watchdog(now)
            wait = min(self._next_wake(now, next_registry), watch_in)
            self._alarm.wake_up.wait(0.1 if retry_soon else wait)
            self._alarm.wake_up.clear()

    def _renew_due(self, now: float) -> None:
        """Extend every lease past a third of its length."""
        if not (self._renews and self._alarm.due(now)):
            return
        due, next_at = self._ledger.due_for_renewal(now, STAMP_AFTER_S)
        self._alarm.renew_by(next_at)
        if not due:
            return
        away_s = 0.0
        try:
            away_s = renew(
                self._jobs, due, self._outage, self._worker_id,
                on_cancel=self._cancel, on_lost=self._lose,
            )  # fmt: skip
        finally:  # renewed: a third of a lease on; unsent: after the outage's wait
            for lease in due:
                if lease.renewable:
                    self._alarm.renew_by(max(lease.renewal_time(), now + away_s))

    def _cancel(self, lease: Lease, why: str) -> None:
        self._runner.stop(lease.key, Cancelled)

    def _lose(self, lease: Lease, why: str) -> None:
        if not lease.finishing:  # a finished job's complete may simply have won the race
            lease.lost = why
            self._tally.add("lost")
            logger.warning(
                "job %s %s: lease lost (%s); the task keeps running but its outcome will be "
                "discarded", lease.claimed.id, lease.task, why,
            )  # fmt: skip

    def _next_wake(self, now: float, next_registry: float) -> float:
        due = [self._alarm.renew_at(), next_registry, now + 1.0]
        if self._ledger.held_count() or self._driver.pending:
            due.append(now + KEEP_UP_S)
        if self._events.since:
            due.append(self._events.since + EVENTS_AGE_S)
        return max(0.005, min(due) - now)

    def _send_events(self) -> None:
        send_events(self._jobs, self._events)

    def _give_back_stuck(self, now: float) -> None:
        """Release read-ahead jobs stuck behind a slow one, so another worker runs them.

        Read-ahead is sized by the average duration, which cannot know that the
        next job is slow; without this, short jobs would sit leased here, unrun,
        for as long as the slow one takes.
        """
        if now < self._next_give_back_check or self._stopping.is_set():
            return
        self._next_give_back_check = now + GIVE_BACK_CHECK_S
        stuck = self._ledger.stuck(now)
        if stuck:
            logger.info("giving back %d job(s) waiting behind a slow one", len(stuck))
            self._endings.release(*stuck)
