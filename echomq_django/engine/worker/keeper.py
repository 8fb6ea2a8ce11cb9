"""The supervisor's heartbeat: it keeps the leases its child workers hold, and their
runs within their limits.

It runs in the supervisor, where no task runs, so no task can starve it: a task
holding its child's GIL in one long C call still has its lease renewed. On each
beat, from each child's copy of leases (``subworker``) and its board:

* renews a lease a third through (``Jobs.extend_many``, one call for all), and a
  running job's every second: the renewal's reply is how a cancel reaches it;
* stamps the start of a run that has lasted STAMP_AFTER_S (its "started" event);
* stamps on each child's board until when its leases hold, renewed (``board.py``):
  a child whose supervisor stops renewing (frozen, starved, cut from the server)
  stops itself before they lapse;
* soft-stops a run at its time limit (``TimeLimitExceeded`` raised in it, in the
  child), and a cancelled one (``Cancelled``); a run still going HARD_GRACE_S
  later gets its child killed: the supervisor then ends its job (``supervisor``).

A lease found lost (``StaleToken``: reaped and claimed by someone else, or simply
ended by the child meanwhile) is renewed no more; the child is told, and discards
the job's outcome if it still holds it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence

from ..events import EVENTS_AGE_S, EventLog
from ..jobs import Jobs
from ..outage import Outage
from .board import stop_by
from .children import Key
from .lease import STAMP_AFTER_S, Lease
from .renewal import renew, send_events
from .running import HARD_GRACE_S
from .subworker import Subworker

logger = logging.getLogger("echomq.worker")

POLL_S = 0.05  # how often the boards are read while a child holds leases
# How often they are read while none does: a claim's lease is reported (``hold``) with
# no wake-up, and is due for renewal a third through (and its child's watch stops
# it a quarter before its end: ``board.stop_by``), 166 ms into a 500 ms lease.
IDLE_S = 0.1


class Keeper:
    def __init__(
        self,
        jobs: Jobs,
        subworkers: Sequence[Subworker],
        outage: Outage,
        events: EventLog,
        worker_id: str,
        *,
        registry: Callable[[], None],
        registry_interval_s: float,
        hard_grace_s: float = HARD_GRACE_S,
    ) -> None:
        self._jobs = jobs
        self._subworkers = subworkers
        self._outage = outage
        self._events = events
        self._worker_id = worker_id
        self._registry = registry
        self._registry_interval_s = registry_interval_s
        self._hard_grace_s = hard_grace_s
        self._stops: dict[Key, tuple[str, float]] = {}  # soft stops sent: (name, when)
        self._renew_after = 0.0  # monotonic: the server was away; renewals wait till then
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="echomq-keeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, deadline: float = math.inf) -> None:
        """End the beats; one stuck on a half-open connection is waited for no longer
        than ``deadline`` (monotonic): the thread is a daemon."""
        self._done.set()
        self._thread.join(max(0.25, min(5.0, deadline - time.monotonic())))
        send_events(self._jobs, self._events)

    def _loop(self) -> None:
        next_registry = 0.0
        while not self._done.is_set():
            now = time.monotonic()
            try:
                wait = self._beat(now)
            except Exception:  # this thread keeps every lease alive: it must not die
                logger.exception("keeping the children's leases failed")
                wait = 0.1
            if now >= next_registry:
                self._registry()
                next_registry = now + self._registry_interval_s
            if self._events.due(now):
                send_events(self._jobs, self._events)
            elif self._events.since:
                wait = min(wait, self._events.since + EVENTS_AGE_S - now)
            self._done.wait(max(0.005, min(wait, next_registry - now)))

    def _beat(self, now: float) -> float:
        """Renew, stamp and stop what is due; how long until the next beat. While the
        server is away, renewals wait out the outage's backoff; the rest goes on."""
        renewing = now >= self._renew_after
        due: list[tuple[Subworker, Lease]] = []
        next_at = now + IDLE_S
        live_keys: set[Key] = set()
        for sub in self._subworkers:
            if not sub.alive():
                continue
            running = sub.running()
            for lease in running:
                live_keys.add(lease.key)
                next_at = min(next_at, self._watch(sub, lease, now))
                at = lease.renewal_time()
                if not lease.stamped:
                    at = min(at, lease.started + STAMP_AFTER_S)
                if renewing and at <= now and lease.renewable:
                    due.append((sub, lease))
            if renewing and now >= sub.renew_at:
                due += self._scan(sub, now, set(running))
            next_at = min(next_at, max(sub.renew_at, self._renew_after))
            if sub.leases:
                next_at = min(next_at, now + POLL_S)  # a run may begin on the board
        for key in [key for key in self._stops if key not in live_keys]:
            del self._stops[key]  # its run ended
        if due:
            self._renew_after = now + self._extend(due, live_keys)
        for sub in self._subworkers:
            if sub.alive():
                sub.stamp()  # until when its leases hold: it stops then if not renewed
        return next_at - now

    def _scan(
        self, sub: Subworker, now: float, running: set[Lease]
    ) -> list[tuple[Subworker, Lease]]:
        """The held leases due for renewal (running ones are renewed from the board);
        when the next one is due."""
        due, next_at = [], float("inf")
        for lease in sub.held():
            if lease in running or not lease.renewable:
                continue
            at = lease.renewal_time()
            if at <= now:
                due.append((sub, lease))
                at = now + lease.lease_ms / 3000
            next_at = min(next_at, at)
        sub.renew_at = next_at
        return due

    def _watch(self, sub: Subworker, lease: Lease, now: float) -> float:
        """Soft-stop a run at its limit, kill its child HARD_GRACE_S after a soft stop
        it did not obey. Returns when to look at it again."""
        stop = self._stops.get(lease.key)
        if stop is not None:
            name, at = stop
            if now < at + self._hard_grace_s:
                return at + self._hard_grace_s
            logger.error(
                "job %s %s: still running %gs after %s; killing its child process %s",
                lease.claimed.id, lease.task, self._hard_grace_s, name, sub.pid,
            )  # fmt: skip
            sub.kill(lease.key, name)
            return now + 1.0
        if lease.limit_s and now >= lease.started + lease.limit_s:
            self.stop_run(sub, lease, "TimeLimitExceeded", now=now)
            return now + self._hard_grace_s
        return lease.started + lease.limit_s if lease.limit_s else now + 1.0

    def stop_run(
        self, sub: Subworker, lease: Lease, name: str, why: str = "", *, now: float
    ) -> None:
        """The soft stop of a running job; its child is killed if it does not obey."""
        if lease.key not in self._stops:
            self._stops[lease.key] = (name, now)
            sub.stop_run(lease, name, why)

    def _extend(self, due: list[tuple[Subworker, Lease]], running: set[Key]) -> float:
        """Renew (and stamp) the due leases in one round trip; when the server was away,
        how long to wait before trying again (0.0: it answered).
        ``running``: the keys of the leases whose runs are on the boards."""
        child_of = {lease.key: sub for sub, lease in due}
        now = time.monotonic()

        def cancel(lease: Lease, why: str) -> None:
            if lease.key in running:
                self.stop_run(child_of[lease.key], lease, "Cancelled", why, now=now)
            else:  # it waits in the child: it is ended there without running
                child_of[lease.key].stop_run(lease, "Cancelled", why)

        def lose(lease: Lease, why: str) -> None:
            lease.lost = why  # the child may simply have ended it meanwhile
            child_of[lease.key].lose(lease, why)

        leases = [lease for _, lease in due]
        return renew(self._jobs, leases, self._outage, self._worker_id, on_cancel=cancel,
                     on_lost=lose, renew_by=child_stops)  # fmt: skip


def child_stops(lease: Lease) -> float:
    """When the child holding ``lease`` stops itself unless it is renewed (``stop_by``): a
    margin before the lease runs out. A renewal retried after the lease's own end/4 could
    come after this, and a server back in time would still see the child stop."""
    return stop_by(lease.renewed_at, lease.lease_ms)
