"""The completions of finished jobs, sent in batches: fast jobs share a round trip.

An executor that finishes a job queues its completion (``add``). The batch goes out
on the worker's wire (``send``) once it is due: full, FLUSH_AGE_S old, or at once if
no other job is ready to run here (then nothing else would send it soon). Whoever
drives the wire sends it (``driver``): an executor between two jobs, an executor
with nothing to run, or the heartbeat while every executor is busy (a slow job never
holds back the results of short ones), and nobody waits for the reply: it is read
later, and ends the leases. One batch is one ``Jobs.completing``'s script calls.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from ..errors import ServerUnavailable, StaleToken
from ..events import EventLog
from ..jobs import BATCH_MAX, Jobs
from .lease import Lease
from .ledger import Ledger
from .stats import Tally
from .wire import Wire

logger = logging.getLogger("echomq.worker")

FLUSH_MAX = BATCH_MAX  # completions per batch: one complete script call
FLUSH_AGE_S = 0.02  # a finished job waits at most this long for others to share its batch

Batch = list[tuple[Lease, str]]


class Completions:
    def __init__(
        self,
        jobs: Jobs,
        wire: Wire,
        ledger: Ledger,
        tally: Tally,
        worker_id: str,
        *,
        give_up: threading.Event,
        events: EventLog,
    ) -> None:
        self._jobs = jobs
        self._wire = wire
        self._events = events  # job events ride with each batch: no round trip of their own
        self._ledger = ledger
        self._tally = tally
        self._worker_id = worker_id
        self._give_up = give_up  # shutdown's grace is over: stop riding out an outage
        self._lock = threading.Lock()
        self._batch: Batch = []
        self._since = 0.0  # when the oldest completion in the batch was queued
        self._now = False  # due at once: nothing else was ready to run

    def add(self, lease: Lease, result: str) -> None:
        """Queue the completion; the batch is due at once if nothing else runs next here."""
        lease.finishing = True
        nothing_ready = self._ledger.queue(lease)
        with self._lock:
            if not self._batch:
                self._since = time.monotonic()
            self._batch.append((lease, result))
            self._now = self._now or nothing_ready

    @property
    def waiting(self) -> bool:
        """Completions wait to be sent."""
        return bool(self._batch)

    def send(self, *, everything: bool = False) -> None:
        """Send the batch on the wire if it is due (``everything``: whatever it holds)."""
        with self._lock:
            batch = self._batch
            if not batch or not (everything or self._due(time.monotonic())):
                return
            self._batch, self._now = [], False
        items = [(le.claimed.queue, le.claimed.id, le.claimed.token, res) for le, res in batch]
        completing = self._jobs.completing(items, [le.ran_us() for le, _ in batch])
        calls = completing.calls

        def answer(replies: list[Any]) -> None:
            self._answered(batch, completing.replies(replies[: len(calls)]))

        self._wire.send([*calls, *self._events.take()], answer)

    def flush(self) -> None:
        """The shutdown's last batches: sent and answered, riding out an outage until
        the grace is over (the reaper then returns the jobs after their lease)."""
        wire = self._wire
        while True:
            with wire.lock:
                self.send(everything=True)
                while wire.waiting_since:
                    wire.pump(wait=True)
            if not self._batch:
                return
            if self._give_up.wait(max(0.05, wire.down_until - time.monotonic())):
                with self._lock:
                    batch, self._batch = self._batch, []
                self._ledger.forget(*(lease for lease, _ in batch))
                return

    def _due(self, now: float) -> bool:
        return bool(self._batch) and (
            self._now or len(self._batch) >= FLUSH_MAX or now - self._since >= FLUSH_AGE_S
        )

    def _put_back(self, batch: Batch) -> None:
        with self._lock:
            if not self._batch:
                self._since = time.monotonic()
            self._batch[:0] = batch

    def _answered(self, batch: Batch, replies: Sequence[object]) -> None:
        completed, not_run = 0, []
        for (lease, result), reply in zip(batch, replies):
            if isinstance(reply, ServerUnavailable):  # lost, or refused unrun (READONLY)
                not_run.append((lease, result))
                continue
            if isinstance(reply, StaleToken):
                self._tally.add("stale")
                lease.log(self._worker_id, f"finished, not completed ({reply})", outcome="lost")
            elif isinstance(reply, Exception):  # the reaper returns it after its lease
                lease.log(
                    self._worker_id, f"not completed: {reply!r}", logging.ERROR, outcome="error"
                )
            else:
                completed += 1
                lease.log(self._worker_id, "", logging.INFO, outcome="completed")
        self._tally.add("completed", completed)
        if not_run:  # sent again with the next batch (complete is idempotent for its holder)
            self._put_back(not_run)
        resend = {lease.key for lease, _ in not_run}
        self._ledger.forget(*(lease for lease, _ in batch if lease.key not in resend))
