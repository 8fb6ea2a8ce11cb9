"""The fetcher: the thread that claims jobs for the worker's executors.

It claims in batches (one script call leases many jobs), as many as the read-ahead
policy asks (``readahead``), from the queues in order (the first has precedence),
for each queue no more than its share of the slots has room for (``shares``). When
no queue with room has work it waits on the server (``waiting.IdleWait``) for those
queues only, instead of polling; a share left out that gets room cuts the wait. A
claim whose reply was lost is asked again under the same claim id, and the server
answers with the jobs it already leased for it (claim.lua).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable

from ..errors import EchoMQError, ServerUnavailable
from ..events import EventLog
from ..jobs import Claim, Claimed, Jobs
from ..outage import Outage
from .config import WorkerConfig
from .heartbeat import Alarm
from .lease import Lease
from .ledger import Ledger
from .link import Link
from .shares import Share
from .stats import Tally
from .waiting import IdleWait

logger = logging.getLogger("echomq.worker")


LEFT_OUT_BLOCK_S = 0.5  # the longest idle wait while a full share is left out of it


class Fetcher:
    def __init__(
        self,
        jobs: Jobs,
        ledger: Ledger,
        idle: IdleWait,
        alarm: Alarm,
        tally: Tally,
        outage: Outage,
        worker_id: str,
        *,
        config: WorkerConfig,
        link: Link | None,
        stopping: threading.Event,
        on_fatal: Callable[[str], None],
        events: EventLog,
    ) -> None:
        self._jobs = jobs
        self._events = events
        self._ledger = ledger
        self._idle = idle
        self._alarm = alarm
        self._tally = tally
        self._outage = outage
        self._worker_id = worker_id
        self._config = config
        self._queues = list(config.queues)
        self._lease_ms = config.lease_ms
        # A supervised child's link: told of each claim before any of it may start; and
        # every run is in a child process then (``isolated``, see start.lua).
        self._link = link
        self._burst = config.burst
        self._max_jobs = config.max_jobs
        self._stopping = stopping
        self._on_fatal = on_fatal
        # Claim ids never repeat, not even for a worker restarted under the same name
        # (a replay would return the old claim's jobs instead of new ones).
        self._claim_prefix = f"{secrets.token_hex(8)}."
        self._claim_seq = 0
        self._claim_ids: dict[str, str] = {}  # queue -> the id of a claim to replay
        self._thread = threading.Thread(target=self._loop, name="echomq-fetcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _loop(self) -> None:
        try:
            while wants := self._ledger.wait_for_room(self._stopping, self._quota):
                empty_before = self._ledger.held_count() == 0
                try:
                    claimed, next_due = self._claim_round(wants)
                except ServerUnavailable as exc:
                    self._stopping.wait(self._outage.down(exc, "claim"))
                    continue
                except EchoMQError as exc:  # e.g. BUSY (another script), OOM: try again soon
                    logger.error("claim failed: %s; retrying in 1s", exc)
                    self._stopping.wait(1.0)
                    continue
                self._outage.up()
                if claimed:
                    continue
                if self._burst and empty_before:
                    logger.info("burst: the queues are empty and nothing is running")
                    return
                if not self._burst:
                    self._block(wants, next_due)
                else:  # burst with jobs still running: they may retry into pending
                    self._ledger.wait_for_let_go(1.0)
        except BaseException as exc:
            logger.exception("the fetcher failed; stopping the worker")
            self._on_fatal(f"the fetcher failed: {type(exc).__name__}: {exc}")

    def _quota(self) -> int:
        """Jobs still allowed by max_jobs (a large number when there is no limit), and
        by the places left on a supervised child's board."""
        left = 1 << 30 if self._max_jobs is None else self._max_jobs - self._tally.stats.claimed
        if self._link is not None:
            left = min(left, self._link.room())
        return max(0, left)

    def _block(self, wants: dict[Share, int], next_due: tuple[int, str] | None) -> None:
        """Wait on the server for the queues of the shares that had room (a full one's
        wake-up is for another worker); one left out that gets room cuts the wait."""
        shares = self._ledger.shares
        if len(wants) == len(shares):
            self._idle.block(next_due)
            return
        self._ledger.blocking({s for s in shares if s not in wants}, self._idle.cut)
        queues = [q for q in self._queues if self._ledger.share_of(q) in wants]
        # A cut that lands just before the blocking command is sent cannot stop it: the
        # wait is kept short, so a full share's next job waits at most this long.
        self._idle.block(next_due, queues, at_most_s=LEFT_OUT_BLOCK_S)

    def _claim_round(self, wants: dict[Share, int]) -> tuple[int, tuple[int, str] | None]:
        """Claim from the queues in order until each share's want is claimed.

        Returns how many jobs were claimed, and when the earliest scheduled job of
        the queues claimed from is due: (milliseconds from now on the server clock,
        its queue).
        """
        got, next_due = 0, None
        wants = dict(wants)
        for name in self._queues:
            share = self._ledger.share_of(name)
            want = wants.get(share, 0)
            if want <= 0:
                continue
            sent = time.monotonic()
            claim = self._jobs.claim(
                name,
                self._worker_id,
                count=want,
                lease_ms=self._lease_ms,
                claim_id=self._claim_id(name),
                # All of them: each starts within the read-ahead budget (50 ms of work),
                # and a job marked started that had not yet run when this process died
                # only comes back solo, never charged (reap.lua).
                start_now=want,
                isolated=self._link is not None,
            )
            del self._claim_ids[name]  # answered: the next claim is a new one
            if claim.next_due_ms is not None:
                delta = claim.next_due_ms - claim.now_ms
                if next_due is None or delta < next_due[0]:
                    next_due = (delta, name)
            if claim.jobs:
                got += len(claim.jobs)
                wants[share] = want - len(claim.jobs)
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
            Lease(
                c,
                self._granted_lease_ms(claim, c),
                renewed_at=sent,
                claimed_at=sent,
                armed=c.job is not None and c.job.started,
                armed_at_claim=c.job is not None and c.job.started,
                solo=c.job is not None and c.job.solo,
                server_us=claim.now_ms * 1000,
                events=self._events,
                limit_s=self._config.time_limit_ms(c.job.timeout_ms if c.job else 0) / 1000,
            )
            for c in claim.jobs
        ]
        self._tally.add("claimed", len(leases))
        if self._link is not None:
            self._link.hold(leases[0].claimed.queue, sent, leases)
        self._ledger.hold(leases)
        if self._link is None:  # a shorter lease than those held: the heartbeat wakes earlier
            self._alarm.renew_by(min(lease.renewal_time() for lease in leases), wake=True)

    def _granted_lease_ms(self, claim: Claim, claimed: Claimed) -> int:
        """The lease the claim script granted (it falls back to ours for a bad row value)."""
        deadline = claimed.job.lease_deadline if claimed.job else None
        if deadline is None or deadline <= claim.now_ms:
            return self._lease_ms
        return deadline - claim.now_ms
