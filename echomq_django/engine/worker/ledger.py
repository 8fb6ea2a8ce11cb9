"""The leases one worker holds, and where each is: the state its threads share.

A held lease is *ready* (claimed, not started, in claim order), *running*, or
*finished* (its outcome is queued or on its way), until it is let go. The ledger is
the only owner of these sets, behind one lock, and it keeps the rule of who may
start next: a solo job (it was running when a worker died) runs in a child of its
own when there is one, else alone in this process, and nothing starts beside it
(reap.lua then charges a crash to it alone).

The slots are cut into shares (``shares``): a job starts only while its queue's
share has a slot free, and claims are made for a share only while it has room
(``wants``: its read-ahead less what it holds and what is being claimed for it),
so a queue's slow jobs never hold the slots of another. Without queue sizes there
is one share of every slot, and that rule never binds.

Two waits, each for one event, on its own condition:

* ``work``: something changed that may let an idle executor go on: a job was
  claimed, a slot freed, a lease let go (``wait_for_work``);
* ``let_go``: a held job was let go (the shutdown's drain, a burst's wait).

While an executor waits on the server for the queues of the shares that had room,
a share left out getting room cuts that wait (``cut``): its queues may have work.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from . import readahead
from .children import Key
from .lease import Lease
from .shares import Share


class Ledger:
    def __init__(
        self,
        shares: list[Share],
        *,
        can_isolate: bool,
        on_forget: Callable[[list[Lease]], None] | None = None,
    ) -> None:
        self.shares = shares
        self._on_forget = on_forget  # told of the leases let go (a supervised child's link)
        self._share_of = {queue: share for share in shares for queue in share.queues}
        self._can_isolate = can_isolate  # a solo job can run in a child of its own
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._let_go = threading.Condition(self._lock)
        self._held: dict[Key, Lease] = {}
        # Started and not finished: at most one per slot, so read-ahead sizing need not
        # scan the whole read-ahead.
        self._running: set[Lease] = set()
        self._closing = False  # executors return once the ready jobs are gone
        self._solo: Lease | None = None  # a solo job taken: nothing else starts meanwhile
        self._solo_held = 0  # solo jobs held: without a child for them, nothing more is claimed
        self._left_out: set[Share] = set()  # shares without room during an idle wait
        self._cut: Callable[[], None] | None = None  # ends the idle wait on the server
        for share in shares:
            share.read_ahead = share.size

    def share_of(self, queue: str) -> Share:
        return self._share_of[queue]

    def hold(self, leases: list[Lease]) -> None:
        """Claimed (one claim: one queue): they are ready to run, in this order."""
        if not leases:
            return
        with self._lock:
            for lease in leases:
                self._held[lease.key] = lease
                self._solo_held += lease.solo
            share = self._share_of[leases[0].claimed.queue]
            share.held += len(leases)
            share.ready.extend(leases)
            self._work.notify(len(leases))

    def claiming(self, share: Share, count: int) -> None:
        """``count`` jobs are being claimed for ``share`` (negative: no longer)."""
        with self._lock:
            share.claiming += count

    def wants(self, quota: int) -> dict[Share, int]:
        """How many to claim now for each share with room, in precedence order, at most
        ``quota`` in all (empty: nothing is worth claiming, or a solo job is held that
        runs in this process: nothing may run beside it). A solo job that runs in a
        child of its own stops no claim: the other slots go on."""
        with self._lock:
            self._left_out.clear()
            wants: dict[Share, int] = {}
            for share in self.shares:
                share.read_ahead = self._target(share)
                if quota > 0 and self._worth_claiming(share):
                    wants[share] = min(
                        share.read_ahead - share.unfinished(), quota, readahead.CLAIM_STEP
                    )
                    quota -= wants[share]
            return wants if self._solo_held == 0 or self._can_isolate else {}

    def blocking(self, left_out: set[Share], cut: Callable[[], None]) -> None:
        """An executor waits on the server for the other shares' queues: call ``cut``
        once one of ``left_out`` has room (its queues may have work meanwhile)."""
        with self._lock:
            self._left_out = left_out
            self._cut = cut
            for share in list(left_out):  # room came since wait_for_room: do not block
                self._check_left_out(share)

    def take_now(self) -> Lease | None:
        """The next claimed job to run, in claim order, if one may start now."""
        with self._lock:
            return self._next_ready()

    def startable(self) -> bool:
        """A claimed job may start now."""
        with self._lock:
            return self._startable() is not None

    def wait_for_work(self, timeout: float) -> None:
        """Wait (at most ``timeout``) for a change that may let an idle executor go on;
        at once if a job may start, or the ledger is closing."""
        with self._lock:
            if not self._closing and self._startable() is None:
                self._work.wait(timeout)

    @property
    def closed(self) -> bool:
        """Closing, and no job is left to start: executors stop."""
        return self._closing and not self.has_ready()

    def end_solo(self, lease: Lease) -> None:
        if self._solo is lease:
            with self._lock:
                self._solo = None
                self._work.notify_all()

    def ran(self, lease: Lease, elapsed_ms: float) -> None:
        """Its handler returned (or its process died): it runs no more."""
        with self._lock:
            self._stop_running(lease)
            share = self._share_of[lease.claimed.queue]
            avg = share.avg_ms
            share.avg_ms = elapsed_ms if avg is None else 0.8 * avg + 0.2 * elapsed_ms

    def queue(self, lease: Lease) -> bool:
        """Its completion waits in the batch: it needs no slot. True if no other job is
        ready to start here (then nothing else would flush the batch soon)."""
        with self._lock:
            self._stop_running(lease)
            if not lease.queued:
                lease.queued = True
                share = self._share_of[lease.claimed.queue]
                share.queued += 1
                if self._left_out:
                    self._check_left_out(share)
            return not self.has_ready()

    def forget(self, *leases: Lease) -> None:
        """Let go of held jobs; the waiters are woken once, not once per job."""
        gone = self._let_go_of(leases)
        if gone and self._on_forget is not None:
            self._on_forget(gone)

    def _let_go_of(self, leases: tuple[Lease, ...]) -> list[Lease]:
        with self._lock:
            for lease in leases:
                self._stop_running(lease)
            gone = [lease for lease in leases if self._held.pop(lease.key, None) is not None]
            self._solo_held -= sum(lease.solo for lease in gone)
            for lease in gone:
                share = self._share_of[lease.claimed.queue]
                share.held -= 1
                share.queued -= lease.queued
                if self._left_out:
                    self._check_left_out(share)
            if gone:
                self._work.notify_all()  # room: an idle executor may claim
                self._let_go.notify_all()
            return gone

    def get(self, key: Key) -> Lease | None:
        return self._held.get(key)

    def is_running(self, lease: Lease) -> bool:
        return lease in self._running

    def running_ids(self) -> list[str]:
        with self._lock:
            return [lease.claimed.id for lease in self._running]

    def held_count(self) -> int:
        return len(self._held)

    def has_ready(self) -> bool:
        return any(share.ready for share in self.shares)

    def due_for_renewal(self, now: float, stamp_after_s: float) -> tuple[list[Lease], float]:
        """The leases to extend now (a third through, or a run going on for
        ``stamp_after_s`` whose start the server does not hold yet), and when the next
        one is due (only ``Lease.renewable`` ones)."""
        due: list[Lease] = []
        next_at = float("inf")
        with self._lock:
            for lease in self._held.values():
                if lease.renewable and not lease.released:
                    at = lease.renewal_time()
                    if at <= now:
                        due.append(lease)
                    elif at < next_at:
                        next_at = at
            # A run going on for a while gets its start time on the server now, not at
            # its end: its result shows when it started while it runs.
            for lease in self._running:
                if lease not in due and lease.renewable and not lease.stamped:
                    at = lease.started + stamp_after_s
                    if at <= now:
                        due.append(lease)
                    elif at < next_at:
                        next_at = at
        return due, next_at

    def stuck(self, now: float) -> list[Lease]:
        """Ready jobs waiting longer than readahead.GIVE_BACK_S (behind a slow one):
        marked released, so that an executor that takes one skips it."""
        with self._lock:
            stuck = [
                lease
                for lease in self._held.values()
                if not (lease.started or lease.released)
                and now - lease.claimed_at > readahead.GIVE_BACK_S
            ]
            for lease in stuck:
                lease.released = True
        return stuck

    def take_ready(self) -> list[Lease]:
        """Every job claimed but not started (a stop gives them back)."""
        with self._lock:
            ready = [lease for share in self.shares for lease in share.ready if not lease.released]
            for share in self.shares:
                share.ready.clear()
        return ready

    def unfinished(self) -> list[Lease]:
        """Held leases whose outcome is not on its way (their task may still run)."""
        with self._lock:
            return [lease for lease in self._held.values() if not lease.finishing]

    def wait_for_let_go(self, timeout: float) -> None:
        with self._lock:
            if self._held:
                self._let_go.wait(timeout)

    def drain(self, deadline: Callable[[], float | None], each: Callable[[], None]) -> bool:
        """Wait until nothing is held, calling ``each()`` at every look; False once
        ``deadline()`` (monotonic) has passed."""
        while True:
            each()
            with self._lock:
                if not self._held:
                    return True
                end = deadline()
                if end is not None and end <= time.monotonic():
                    return False
                wait = 0.2 if end is None else min(end - time.monotonic(), 0.2)
                self._let_go.wait(max(wait, 0.0))

    def close(self) -> None:
        """Executors stop once the ready jobs are gone."""
        with self._lock:
            self._closing = True
            self._work.notify_all()

    def _next_ready(self) -> Lease | None:
        """Pop the lease to run next, if one may start now. Called with the lock held."""
        share = self._startable()
        return None if share is None else self._pop_ready(share)

    def _pop_ready(self, share: Share) -> Lease:
        """Start ``share``'s next ready lease that may start (``_startable`` chose the
        share): the first, unless it is a solo job waiting for the child. Lock held."""
        ready = share.ready
        lease = self._first_startable(ready)
        assert lease is not None  # _startable chose the share for it
        if lease is ready[0]:
            ready.popleft()
        else:
            ready.remove(lease)  # past a solo job that waits for the solo child
        if lease.solo:
            self._solo = lease
        lease.started = time.monotonic()  # give-back leaves it alone now
        self._running.add(lease)
        share.running += 1
        return lease

    def _startable(self) -> Share | None:
        """The first share (in precedence order) whose next ready job may start now: it
        has a slot free, and no solo job forbids it. Called with the lock held."""
        for share in self.shares:
            ready = share.ready
            while ready and ready[0].released:
                ready.popleft()  # given back meanwhile (a stuck read-ahead job)
            if (
                ready
                and share.running < share.size
                and (self._may_start(ready[0]) or self._first_startable(ready))
            ):
                return share
        return None

    def _first_startable(self, ready: deque[Lease]) -> Lease | None:
        """The first of ``ready`` that may start now: the head, or one past a solo job
        that waits for the solo child to be free. Called with the lock held."""
        head = ready[0] if ready else None
        if head is None or self._may_start(head):
            return head
        return next((le for le in ready if not le.released and self._may_start(le)), None)

    def _may_start(self, lease: Lease) -> bool:
        """This ready job may start now, as far as solo jobs go. Called with the lock held."""
        if self._solo is not None and (lease.solo or not self._can_isolate):
            return False  # a solo job runs: nothing else starts (no child), or no second one
        return not (lease.solo and self._running and not self._can_isolate)

    def _stop_running(self, lease: Lease) -> None:
        """Its slot is free. A job of its share waiting for one may start: an executor
        idle meanwhile takes it (the one that ran this may still be ending it)."""
        if lease in self._running:
            self._running.remove(lease)
            share = self._share_of[lease.claimed.queue]
            share.running -= 1
            if share.ready:
                self._work.notify()

    def _check_left_out(self, share: Share) -> None:
        """A share got room: end the idle wait on the server if it left it out."""
        if share in self._left_out and self._worth_claiming(share) and self._cut is not None:
            self._left_out.clear()
            self._cut()

    def _worth_claiming(self, share: Share) -> bool:
        free = share.read_ahead - share.unfinished()
        return readahead.worth_claiming(free, share.read_ahead, not share.ready)

    def _target(self, share: Share) -> int:
        now = time.monotonic()
        share_of = self._share_of
        longest = max(
            (
                (now - lease.started) * 1000
                for lease in self._running
                if share_of[lease.claimed.queue] is share
            ),
            default=0.0,
        )
        return readahead.target(share.size, share.avg_ms, longest)
