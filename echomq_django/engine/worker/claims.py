"""The claims: how a worker leases its jobs, over its wire, without waiting for them.

A claim round asks, for each share of the slots with room (``Ledger.wants``), its
queues in order: a queue's claim is sent, and if it leases fewer jobs than its share
wants, the next queue's claim is sent for the rest as soon as the reply is read (the
first queue has precedence). One claim call leases many jobs, and rounds are
read-ahead: a round starts while the jobs held before it still run (``driver``), so
executors do not wait for a claim's round trip while there is work.

A claim whose reply was lost is asked again under the same claim id, and the server
answers with the jobs it already leased for it (claim.lua).
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..errors import EchoMQError, ServerUnavailable
from ..events import EventLog
from ..jobs import Claim, Claimed, Jobs
from ..outage import Outage
from .alarm import Alarm
from .config import WorkerConfig
from .lease import Lease
from .ledger import Ledger
from .link import Link
from .shares import Share
from .stats import Tally
from .wire import Wire

logger = logging.getLogger("echomq.worker")

REFUSED_WAIT_S = 1.0  # after a queue's claim the server refused (OOM, a corrupt key)


@dataclass(eq=False, slots=True)
class Round:
    """One claim round: what each share wants, and what came of it so far."""

    wants: dict[Share, int]
    at: int = 0  # the next queue to ask, by its place in the worker's queues
    got: int = 0
    held_before: int = 0  # jobs held when it began (a burst ends on an empty round of none)
    next_due: tuple[int, str] | None = None  # (ms from now, queue) of the earliest due job
    refused: bool = False  # a queue was refused, or passed over while it waits to be asked again


class Claims:
    def __init__(
        self,
        jobs: Jobs,
        wire: Wire,
        ledger: Ledger,
        alarm: Alarm,
        tally: Tally,
        outage: Outage,
        events: EventLog,
        worker_id: str,
        *,
        config: WorkerConfig,
        link: Link | None,
    ) -> None:
        self._jobs = jobs
        self._wire = wire
        self._ledger = ledger
        self._alarm = alarm
        self._tally = tally
        self._outage = outage
        self._events = events
        self._worker_id = worker_id
        self._config = config
        self._queues = list(config.queues)
        # A supervised child's link: told of each claim before any of it may start; and
        # every run is in a child process then (``isolated``, see start.lua).
        self._link = link
        # Claim ids never repeat, not even for a worker restarted under the same name
        # (a replay would return the old claim's jobs instead of new ones).
        self._claim_prefix = f"{secrets.token_hex(8)}."
        self._claim_seq = 0
        self._claim_ids: dict[str, str] = {}  # queue -> the id of a claim to replay
        # queue -> monotonic: its last claim was refused (not an outage); not asked before.
        self._refused_until: dict[str, float] = {}
        self.current: Round | None = None  # the round in flight
        self.last: Round | None = None  # the last round that ended
        self.retry_at = 0.0  # monotonic: no round before this (the server refused one)

    def quota(self) -> int:
        """Jobs still allowed by max_jobs (a large number when there is no limit), and
        by the places left on a supervised child's board."""
        most = self._config.max_jobs
        left = 1 << 30 if most is None else most - self._tally.stats.claimed
        if self._link is not None:
            left = min(left, self._link.room())
        return max(0, left)

    def start(self, wants: dict[Share, int]) -> None:
        """Begin a round for ``wants``: its first claim goes out now (wire lock held)."""
        self.current = Round(dict(wants), held_before=self._ledger.held_count())
        self._next(self.current)

    def _next(self, round: Round) -> None:
        """Send the round's next claim: the next queue whose share still wants jobs."""
        while round.at < len(self._queues):
            name = self._queues[round.at]
            round.at += 1
            share = self._ledger.share_of(name)
            want = round.wants.get(share, 0)
            if want <= 0:
                continue
            if self._refused_until.get(name, 0.0) > time.monotonic():
                round.refused = True
                continue
            call = self._jobs.claim_call(
                name,
                self._worker_id,
                count=want,
                lease_ms=self._config.lease_ms,
                claim_id=self._claim_id(name),
                # All of them: each starts within the read-ahead budget (50 ms of work),
                # and a job marked started that had not yet run when this process died
                # only comes back solo, never charged (reap.lua).
                start_now=want,
                isolated=self._link is not None,
            )
            self._ledger.claiming(share, want)
            answer = partial(self._claimed, round, name, share, want, time.monotonic())
            self._wire.send([call], answer)
            return
        self.current, self.last = None, round
        if round.refused and not round.got:  # ask the refused queue again, not wait idle
            now = time.monotonic()
            self.retry_at = min(
                (t for t in self._refused_until.values() if t > now), default=now + REFUSED_WAIT_S
            )

    def _claimed(
        self, round: Round, name: str, share: Share, want: int, sent: float, replies: list[Any]
    ) -> None:
        self._ledger.claiming(share, -want)
        (reply,) = replies
        if isinstance(reply, Exception):
            self._refused(round, name, reply)
            return
        try:
            claim = Claim.from_reply(name, reply)
        except BaseException:
            self.current = None  # a bug: the worker stops (driver.py); no round is left open
            raise
        del self._claim_ids[name]  # answered: the next claim is a new one
        self._refused_until.pop(name, None)  # and the queue is no longer refused
        if claim.next_due_ms is not None:
            delta = claim.next_due_ms - claim.now_ms
            if round.next_due is None or delta < round.next_due[0]:
                round.next_due = (delta, name)
        if claim.jobs:
            round.got += len(claim.jobs)
            round.wants[share] = want - len(claim.jobs)
            self._hold(claim, sent)
        self._next(round)

    def _refused(self, round: Round, queue: str, exc: Exception) -> None:
        """A lost server ends the round: every claim waits out the outage. A queue the
        server refused (OOM, a place of another type: nothing was changed) is asked
        again, same claim id, after a while; the round goes on with the other queues, so
        one broken queue does not stop the worker's others."""
        if isinstance(exc, ServerUnavailable):  # lost, or not run (READONLY, TRYAGAIN)
            self.current = None
            self.retry_at = time.monotonic() + self._outage.down(exc, "claim")
        elif isinstance(exc, EchoMQError):
            logger.error("claim from %s failed: %s; asking it again in %gs", queue, exc,
                         REFUSED_WAIT_S)  # fmt: skip
            self._refused_until[queue] = time.monotonic() + REFUSED_WAIT_S
            round.refused = True
            self._next(round)
        else:
            self.current = None
            raise exc

    def _claim_id(self, queue: str) -> str:
        """The claim's name: kept until the claim is answered, so that a claim whose
        reply was lost is asked again under it and returns its jobs (claim.lua)."""
        if queue not in self._claim_ids:
            self._claim_seq += 1
            self._claim_ids[queue] = f"{self._claim_prefix}{self._claim_seq}"
        return self._claim_ids[queue]

    def _hold(self, claim: Claim, sent: float) -> None:
        config = self._config
        leases = [
            Lease.of_claim(
                c,
                claim,
                sent,
                self._granted_lease_ms(claim, c),
                solo=c.job is not None and c.job.solo,
                events=self._events,
                limit_s=config.time_limit_ms(c.job.timeout_ms if c.job else 0) / 1000,
            )
            for c in claim.jobs
        ]
        self._tally.add("claimed", len(leases))
        if self._link is not None:
            self._link.hold(leases[0].claimed.queue, sent, leases)
        else:  # a shorter lease than those held: the heartbeat wakes earlier
            self._alarm.renew_by(min(lease.renewal_time() for lease in leases), wake=True)
        self._ledger.hold(leases)

    def _granted_lease_ms(self, claim: Claim, claimed: Claimed) -> int:
        """The lease the claim script granted (it falls back to ours for a bad row value)."""
        deadline = claimed.job.lease_deadline if claimed.job else None
        if deadline is None or deadline <= claim.now_ms:
            return self._config.lease_ms
        return deadline - claim.now_ms
