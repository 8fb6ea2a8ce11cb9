"""How a held lease ends when it does not complete: one script call each.

* ``fail``: the task failed (raised, hit its limit, was cancelled): retried or
  dead, per its policy and attempts (``Jobs.retry``);
* ``crashed``: its process died under it (``Jobs.crashed``: charged to its crash
  budget), or, beside other jobs, released free;
* ``release``: given back to pending, refunded (not started, stuck behind a slow
  one, a stop);
* ``leave``: left at a stop whose grace ran out, its run going on in a thread: the
  reaper returns it free once its lease runs out;
* ``discard``: the lease is no longer ours (lost, released): nothing to send.

Each ends by letting the lease go from the ledger.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..errors import ServerUnavailable, StaleToken
from ..jobs import Jobs
from ..outage import Outage
from ..outcome import EndedOutside, Failure, summary_line, tell_ended
from ..outcome import error_object as _as_error_object
from ..retry_policy import RetryPolicy
from .lease import Lease
from .running import Crashed
from .stats import Tally

logger = logging.getLogger("echomq.worker")


class Endings:
    def __init__(
        self,
        jobs: Jobs,
        forget: Callable[..., None],
        tally: Tally,
        outage: Outage,
        worker_id: str,
        *,
        retry_policy: RetryPolicy,
        crash_budget: int,
        give_up: threading.Event,
        ended_outside: EndedOutside | None = None,
    ) -> None:
        self._jobs = jobs
        self._forget = forget  # let the ended leases go (the worker's ledger)
        self._tally = tally
        self._outage = outage
        self._worker_id = worker_id
        self._retry_policy = retry_policy
        self._crash_budget = crash_budget
        self._give_up = give_up  # shutdown's grace is over: stop riding out an outage
        # Told of a job whose run ended for good outside the task's own process (its
        # process crashed, or was killed at the limit): the task could not say so.
        self._ended_outside = ended_outside

    def fail(self, lease: Lease, failure: Failure, *, outside: bool = False) -> None:
        """``outside``: the run was ended from outside its process (killed)."""
        lease.finishing = True
        claimed = lease.claimed
        backoff = failure.backoff_ms
        if backoff is None:
            backoff = self._retry_policy.backoff_ms(lease.attempt)
        try:
            outcome = self._outage.call(
                "retry",
                lambda: self._jobs.retry(
                    claimed.queue,
                    claimed.id,
                    claimed.token,
                    error=_as_error_object(failure.error, failure.summary),
                    summary=summary_line(failure.summary),
                    backoff_ms=backoff,
                    give_up=not failure.retry,
                    ran_us=lease.ran_us(),
                ),
                self._give_up,
            )
        except StaleToken as exc:
            self._tally.add("stale")
            lease.log(
                self._worker_id, f"failed, lease lost ({exc})", outcome="lost", failure=failure
            )
        except ServerUnavailable:
            pass  # shutdown gave up: the reaper returns it after the lease
        else:
            if outcome.state == "cancelled":
                self._cancelled(lease)
            if outcome.state in ("dead", "cancelled"):
                self._tally.add("dead")
                lease.log(self._worker_id, "", logging.ERROR, outcome="dead", failure=failure)
                if outside:
                    self._tell_ended(lease)
            else:
                self._tally.add("retried")
                wait = backoff if outcome.state == "scheduled" else 0
                lease.log(self._worker_id, "", outcome="retried", failure=failure, retry_in_ms=wait)
        self._forget(lease)

    def crashed(self, lease: Lease, crash: Crashed) -> None:
        """Its process died under it. Alone in it: the job's own crash, charged now (no
        lease to wait out). Beside others, or killed by us for another job's limit:
        released at once, free (solo if it may have been the cause)."""
        lease.finishing = True
        if not crash.alone:
            lease.log(self._worker_id, crash.why, outcome="released")
            self.release(lease, solo=not crash.ours)
            return
        try:
            outcome = self._outage.call(
                "crashed",
                lambda: self._jobs.crashed(
                    lease.claimed.queue,
                    lease.claimed.id,
                    lease.claimed.token,
                    why=crash.why.replace('"', "'"),
                    crash_budget=self._crash_budget,
                    ran_us=lease.ran_us(),
                ),
                self._give_up,
            )
        except StaleToken as exc:
            lease.log(
                self._worker_id,
                f"crashed ({crash.why}) but its lease was lost ({exc})",
                outcome="lost",
            )
        except ServerUnavailable:
            pass  # shutdown gave up: the reaper returns it after the lease
        else:
            if outcome.state == "cancelled":  # not charged: dead as the operator asked
                self._cancelled(lease)
                self._tally.add("dead")
                lease.log(self._worker_id, crash.why, outcome="dead")
            else:
                self._tally.add("dead" if outcome.state == "dead" else "retried")
                lease.log(
                    self._worker_id,
                    f"{crash.why}; {outcome.state} after {outcome.due_ms} crash(es)",
                    outcome="crashed",
                )
            if outcome.state in ("dead", "cancelled"):
                self._tell_ended(lease)
        self._forget(lease)

    def release(self, *leases: Lease, solo: bool = False) -> None:
        """Give jobs back to pending, refunded, in one round trip (a read-ahead of up to
        MAX_READ_AHEAD jobs at shutdown, or stuck behind a slow one)."""
        for lease in leases:
            lease.released = True
        items = [(le.claimed.queue, le.claimed.id, le.claimed.token) for le in leases]
        try:
            began = [bool(le.started) for le in leases]  # a read-ahead never run: no run
            replies = self._jobs.release_many(items, solo=solo, began=began)
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
            elif reply == "cancelled":  # while it ran: dead now (release.lua)
                self._cancelled(lease)
                self._tally.add("dead")
                lease.log(self._worker_id, "", outcome="dead")
            else:
                released += 1
                logger.info("job %s %s released back to pending", lease.claimed.id, lease.task)
        self._tally.add("released", released)
        self._forget(*leases)

    def leave(self, *leases: Lease) -> None:
        """Leave jobs whose runs go on in threads this process cannot stop, at the end of
        a stop's grace: nobody may start them while those threads may run (until this
        process exits), and the reaper returns them free after their leases."""
        for lease in leases:
            lease.released = True  # their outcome, if it comes, is not for us to send
        items = [(le.claimed.queue, le.claimed.id, le.claimed.token) for le in leases]
        try:
            replies = self._jobs.leave_many(items)
        except ServerUnavailable as exc:
            replies = [exc] * len(leases)
        for lease, reply in zip(leases, replies):
            if isinstance(reply, Exception) and not isinstance(reply, StaleToken):
                logger.warning(
                    "job %s: could not mark it left at the stop (%s); the reaper will "
                    "return it as it returns the jobs of a worker that died", lease.claimed.id,
                    reply,
                )  # fmt: skip

    def _tell_ended(self, lease: Lease) -> None:
        tell_ended(self._ended_outside, lease.claimed.queue, lease.claimed.id, logger)

    @staticmethod
    def _cancelled(lease: Lease) -> None:
        """The script found the job cancelled while it ran, before this worker heard of
        it: it is dead as Cancelled, and its event line says so."""
        lease.cancelled = lease.cancelled or "cancelled by an operator"

    def discard(self, lease: Lease) -> None:
        if lease.lost:
            lease.log(self._worker_id, f"lease lost ({lease.lost})", outcome="discarded")
        else:
            lease.log(self._worker_id, "released at shutdown", outcome="discarded")
        self._forget(lease)
