"""A job the worker holds, from its claim until its outcome is stored.

The one record the worker's parts share: a claim creates it, an executor runs
it, the heartbeat renews it, and whichever part ends it logs its event line. Each
flag is set by one part and read by the others (plain attribute stores: atomic).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..events import EventLog, failure_traceback, log_job
from ..jobs import Claim, Claimed
from ..outcome import Failure
from ..rows import counted_attempts
from .children import Key

CANCEL_CHECK_S = 1.0  # a running job's lease is renewed at least this often
# A run still going after this long gets its start stamped on the server (and its
# "started" event): a shorter one is stamped by its outcome, with no call of its own.
STAMP_AFTER_S = 0.05


@dataclass(eq=False, slots=True)
class Lease:
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
    started: float = 0.0
    elapsed_ms: float = 0.0  # how long the handler ran
    finishing: bool = False  # the outcome is on its way: a refused extend means nothing
    queued: bool = False  # its completion waits in the batch (it needs no executor)
    lost: str = ""  # why the heartbeat found the lease lost
    released: bool = False
    abandoned: bool = False  # stuck past its time limit: failed, its slot given to a new thread
    slot: int = 0  # the executor running it
    cancelled: str = ""  # an operator's reason: the task is being stopped
    events: EventLog | None = None  # where its job events go (the queue's stream)
    limit_s: float = 0.0  # how long its run may take (0: no limit)
    index: int = 0  # a supervised child's number for it (board.py), 0 elsewhere
    key: Key = field(init=False)  # (queue, id, token): this lease
    task: str = field(init=False)
    attempt: int = field(init=False)  # this run's number, as max_attempts counts
    max_attempts: int = field(init=False)

    @classmethod
    def of_claim(
        cls, claimed: Claimed, claim: Claim, sent: float, lease_ms: int, **more: Any
    ) -> Lease:
        """A job of ``claim`` (sent at monotonic ``sent``), as its holder keeps it: armed if
        the claim marked it started, its run's times on the claim's server clock."""
        started = claimed.job is not None and claimed.job.started
        return cls(
            claimed, lease_ms, renewed_at=sent, claimed_at=sent, armed=started,
            armed_at_claim=started, server_us=claim.now_ms * 1000, **more,
        )  # fmt: skip

    def __post_init__(self) -> None:
        # A job may come back to this worker (released, reaped): its token tells the two apart.
        claimed, job = self.claimed, self.claimed.job
        self.key = (claimed.queue, claimed.id, claimed.token)
        if job is None:  # a corrupt row; or a supervisor's copy, which sets these itself
            self.task, self.attempt, self.max_attempts = "?", claimed.token, 0
        else:
            self.task, self.max_attempts = job.task, job.max_attempts
            self.attempt = counted_attempts(claimed.token, job.refunds)

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

    def stop_clock(self) -> None:
        """Its run was ended from outside its handler (killed, abandoned, a crashed
        child): how long it ran, for its event line (the handler's return sets it
        otherwise). ``started`` is the run's monotonic start, here or on the board."""
        if self.started and not self.elapsed_ms:
            self.elapsed_ms = (time.monotonic() - self.started) * 1000

    def ran_us(self) -> int:
        """How long ago its run began, for the server to stamp it; -1 once stamped."""
        if self.stamped or not self.started:
            return -1
        return int((time.monotonic() - self.started) * 1_000_000)

    @property
    def renewable(self) -> bool:
        """Whether renewing it is any use. Not once lost (it is someone else's now), nor
        once cancelled: the server refuses a cancelled job's renewal (EMQCANCEL), so its
        lease runs out and the reaper ends it; asked again, a task that goes on after its
        cancel would cost an extend on every beat, and a supervised child stamped by its
        lapse would stop the runs beside it."""
        return not (self.lost or self.cancelled)

    def renewal_time(self) -> float:
        """When the lease is a third through: the heartbeat extends it then. A running
        job's is renewed at least every CANCEL_CHECK_S: the renewal is how a cancel
        reaches it."""
        every = self.lease_ms / 3000
        if self.started:
            every = min(every, CANCEL_CHECK_S)
        return self.renewed_at + every

    def log(
        self,
        worker_id: str,
        what: str,
        level: int = logging.WARNING,
        *,
        outcome: str,
        failure: Failure | None = None,
        retry_in_ms: int | None = None,
    ) -> None:
        """Its event line (engine/events.py), and the event for the queue's stream. A
        failure's traceback goes with it unless the Django layer ended the task (``retry``
        False): its logger printed it then. An operator's cancel ends it "cancelled"."""
        claimed = self.claimed
        if outcome == "dead" and self.cancelled:
            outcome = "cancelled"
        log_job(
            level,
            job_id=claimed.id,
            task=self.task,
            queue=claimed.queue,
            attempt=self.attempt,
            max_attempts=self.max_attempts,
            duration_ms=self.elapsed_ms,
            outcome=outcome,
            worker=worker_id,
            error=failure.summary if failure else "",
            retry_in_ms=retry_in_ms,
            detail=what,
            traceback=failure_traceback(failure.error) if failure and failure.retry else "",
            events=self.events,
        )

    def announce_start(self, worker_id: str) -> None:
        """Its "started" event: only for a run that lasts (the heartbeat stamps its start).
        A shorter run has none: its outcome's event, with its duration, says it ran, and
        the hot path adds one event per job, not two."""
        if self.events is None:
            return
        claimed = self.claimed
        values = ("started", claimed.id, self.task, self.attempt, self.max_attempts, 0, worker_id,
                  "", "", "")  # fmt: skip
        self.events.add(claimed.queue, values)


# The lease whose run this thread is in, and its worker's stop: what a run's own code
# asks (``this_run_abandoned`` when it ends, long after the worker may have given the
# run up; ``stop_requested`` while it runs).
_current = threading.local()


def running_here(lease: Lease | None, stopping: threading.Event | None = None) -> None:
    """This thread now runs ``lease``'s job for a worker whose stop is ``stopping``
    (None: no job)."""
    _current.lease, _current.stopping = lease, stopping


def stop_requested() -> bool:
    """The worker running this thread's job is stopping (SIGTERM, a deploy): the job has
    its ``--grace`` to finish. False outside a worker's run."""
    stopping = getattr(_current, "stopping", None)
    return stopping is not None and stopping.is_set()


def this_run_abandoned() -> bool:
    """The run this thread is in was abandoned: it outlived its soft stop, its failure was
    recorded, and its outcome (and its ``task_finished``) is no longer its to tell."""
    lease = getattr(_current, "lease", None)
    return lease is not None and lease.abandoned
