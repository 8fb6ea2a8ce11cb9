"""The completions of finished jobs, sent in batches: fast jobs share a round trip.

An executor that finishes a job queues its completion (``add``). If no other job
is ready to start here, the batch is due at once (the result is reported at once);
else it waits until it is FLUSH_AGE_S old or full. The heartbeat's thread sends a
due batch (``flush``), never an executor: an executor waiting for that round trip
could not start the job the fetcher delivers meanwhile (a third of a one-process
worker's time went there). A slow job never holds back the results of short ones.
One batch is one ``Jobs.complete_many`` call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from ..errors import ServerUnavailable, StaleToken
from ..events import EventLog
from ..jobs import BATCH_MAX, Jobs
from ..outage import Outage
from .lease import Lease
from .ledger import Ledger
from .stats import Tally

logger = logging.getLogger("echomq.worker")

FLUSH_MAX = BATCH_MAX  # completions per flush: one complete script call
FLUSH_AGE_S = 0.02  # a finished job waits at most this long for others to share its flush


class Completions:
    def __init__(
        self,
        jobs: Jobs,
        ledger: Ledger,
        tally: Tally,
        outage: Outage,
        worker_id: str,
        *,
        give_up: threading.Event,
        on_due: Callable[[], None],
        events: EventLog,
    ) -> None:
        self._jobs = jobs
        self._events = events  # job events ride with each batch: no round trip of their own
        self._ledger = ledger
        self._tally = tally
        self._outage = outage
        self._worker_id = worker_id
        self._give_up = give_up  # shutdown's grace is over: stop riding out an outage
        self._on_due = on_due  # wake the heartbeat: a batch will be due
        self._lock = threading.Lock()
        self._batch: list[tuple[Lease, str]] = []
        self._since = 0.0  # when the oldest completion in the batch was queued
        self._now = False  # due at once: nothing else was ready to run

    def add(self, lease: Lease, result: str) -> None:
        """Queue the completion; the batch is due at once if nothing else runs next here."""
        lease.finishing = True
        nothing_ready = self._ledger.queue(lease)
        now = time.monotonic()
        with self._lock:
            started_batch = not self._batch
            if started_batch:
                self._since = now
            self._batch.append((lease, result))
            self._now = self._now or nothing_ready
            due = self._due(now)
        if due or started_batch:
            self._on_due()

    def flush_soon(self) -> None:
        """Make the batch due at once (an executor has nothing to run)."""
        with self._lock:
            if not self._batch:
                return
            self._now = True
        self._on_due()

    def due_at(self) -> float | None:
        """When the batch must be sent at the latest (None: it is empty)."""
        with self._lock:
            if not self._batch:
                return None
            return self._since if self._now else self._since + FLUSH_AGE_S

    def is_due(self, now: float) -> bool:
        with self._lock:
            return self._due(now)

    def flush(self, *, patient: bool = True) -> None:
        """Send the batch in one round trip (one complete call per queue), if any.
        ``patient`` (the shutdown's last flush) rides out an outage here; the
        heartbeat is not patient: it puts the batch back and goes on renewing leases."""
        with self._lock:
            batch, self._batch, self._now = self._batch, [], False
        if batch:
            self._send(batch, patient)

    def _due(self, now: float) -> bool:
        return bool(self._batch) and (
            self._now or len(self._batch) >= FLUSH_MAX or now - self._since >= FLUSH_AGE_S
        )

    def _put_back(self, batch: list[tuple[Lease, str]]) -> None:
        with self._lock:
            if not self._batch:
                self._since = time.monotonic()
            self._batch[:0] = batch

    def _send(self, batch: list[tuple[Lease, str]], patient: bool) -> None:
        items = [(le.claimed.queue, le.claimed.id, le.claimed.token, res) for le, res in batch]
        ran_us = [le.ran_us() for le, _ in batch]

        def send() -> Sequence[object]:
            riders = self._events.take()  # the events so far (none of this batch's yet)
            return self._jobs.complete_many(items, ran_us=ran_us, riders=riders)

        try:
            if patient:
                replies = self._outage.call("complete", send, self._give_up)
            else:
                replies = send()
                self._outage.up()
        except Exception as exc:
            if not patient and isinstance(exc, ServerUnavailable):
                self._outage.down(exc, "complete")
                self._put_back(batch)
                return
            if not isinstance(exc, ServerUnavailable):  # else shutdown's grace gave up
                logger.exception("completing %d job(s) failed", len(batch))
            # The reaper returns them after their lease.
            self._ledger.forget(*(lease for lease, _ in batch))
            return
        completed, not_run = 0, []
        for (lease, result), reply in zip(batch, replies):
            if isinstance(reply, ServerUnavailable):  # refused unrun (READONLY, TRYAGAIN)
                not_run.append((lease, result))
                continue
            if isinstance(reply, StaleToken):
                self._tally.add("stale")
                lease.log(self._worker_id, f"finished, not completed ({reply})", outcome="lost")
            elif isinstance(reply, Exception):
                lease.log(
                    self._worker_id, f"not completed: {reply!r}", logging.ERROR, outcome="error"
                )
            else:
                completed += 1
                lease.log(self._worker_id, "", logging.INFO, outcome="completed")
        self._tally.add("completed", completed)
        if not_run:  # sent again with the next flush, in FLUSH_AGE_S
            self._put_back(not_run)
        resend = {lease.key for lease, _ in not_run}
        self._ledger.forget(*(lease for lease, _ in batch if lease.key not in resend))
