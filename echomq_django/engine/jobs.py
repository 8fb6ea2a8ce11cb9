"""The leased state machine: every operation is exactly one script call (the facade).

::

    enqueue -> pending | scheduled
    claim: pending -> active          (attempts += 1: the fencing token; lease on the server
                                       clock; idempotent per claim id; marks runs started)
    start: active -> active           (token-fenced; a solo job's run begins)
    complete: active -> completed     (token-fenced; idempotent for its holder)
    retry: active -> scheduled | pending | dead   (token-fenced; dead past max attempts)
    crashed: active -> pending | dead (token-fenced; its process died: one crash charged)
    extend: active -> active          (token-fenced; new deadline; refused when cancelled)
    release: active -> pending        (token-fenced; the attempt is refunded)
    reap: expired active -> pending | dead   (free, or solo; dead at the crash budget)
    promote / run_now: scheduled -> pending
    cancel: pending | scheduled -> dead, active -> flagged;  retry_dead: dead -> pending
    delete, trim;  purge, retry_dead of all: the set as bound (as an operator was asked)
    fire and the schedule_* scripts: see scheduler.py

Reads (a row, the counts, a page of a place) are plain reads or read-only scripts.
The only writes outside scripts are the queue registry (a SET outside any queue's
slot, so it can never be part of a transition).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from . import script
from .batches import Completing, in_batches, per_job
from .bounds import (
    BATCH_BYTES,
    BATCH_MAX,
    DEFAULT_CRASH_BUDGET,
    DEFAULT_DEAD_TTL_MS,
    DEFAULT_LEASE_MS,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_RESULT_TTL_MS,
    MAX_CRASH_BUDGET,
    MAX_DELAY_MS,
    MAX_LEASE_MS,
    MAX_PRIORITY,
    MIN_PRIORITY,
    PAGE_MAX,
    SWEEP_LIMIT,
    SWEEP_MAX,
)
from .connector import Call, Connector
from .errors import AccessDenied, EnqueueUnknown, InvalidJobOptions, ServerUnavailable
from .keyspace import QueueKeys, new_job_id, validate_worker_id
from .new_job import Enqueued, NewJob
from .operator_actions import OperatorActions
from .queue_registry import QueueRegistry
from .reads import Reads
from .replies import (
    Bound,
    Claim,
    Claimed,
    Page,
    PageEntry,
    Progress,
    QueueStats,
    RetryOutcome,
    Sweep,
)
from .rows import ROW_FIELDS, Job
from .sweeps import Sweeps
from .validation import check_int, check_token, error_object, one_line

# The names callers import from here (the facade), wherever they are defined.
__all__ = [
    "BATCH_BYTES", "BATCH_MAX", "DEFAULT_CRASH_BUDGET", "DEFAULT_DEAD_TTL_MS", "DEFAULT_LEASE_MS",
    "DEFAULT_MAX_ATTEMPTS", "DEFAULT_MAX_PAYLOAD", "DEFAULT_RESULT_TTL_MS", "MAX_DELAY_MS",
    "MAX_LEASE_MS", "MAX_PRIORITY", "MIN_PRIORITY", "PAGE_MAX", "ROW_FIELDS", "SWEEP_LIMIT",
    "SWEEP_MAX", "Bound", "Claim", "Claimed", "Completing", "Enqueued", "Job", "Jobs", "NewJob", "Page",
    "PageEntry",
    "Progress", "QueueStats", "RetryOutcome", "Sweep",
]  # fmt: skip


class Jobs(QueueRegistry, Reads, Sweeps, OperatorActions):
    """The engine API over one connector. Thread-safe; one per process is enough.

    The transitions of one job are here; the registry, the sweeps, the reads and the
    operator actions are mixed in."""

    def __init__(self, connector: Connector, *, max_payload: int = DEFAULT_MAX_PAYLOAD) -> None:
        super().__init__(connector)
        self.max_payload = max_payload

    # -- enqueue ----------------------------------------------------------------

    def enqueue(self, queue: str, job: NewJob) -> Enqueued:
        """Store one job; ``JobExists`` if its id is taken."""
        (stored,) = self.enqueue_many(queue, [job])
        return stored

    def enqueue_many(self, queue: str, jobs: Iterable[NewJob]) -> list[Enqueued]:
        """Enqueue many jobs in one round trip: one script call per BATCH_MAX jobs.

        All jobs are validated before anything is sent. Within one call each job is
        stored or refused on its own (an id that exists); the first refusal is raised
        after the others were stored.
        """
        keys = QueueKeys.of(queue)
        jobs = [job.validate(self.max_payload) for job in jobs]
        self.register_queue(queue)
        batches = in_batches(jobs, lambda job: len(job.payload))
        calls = [self._enqueue_call(keys, batch) for batch in batches]
        stored: list[Any] = []
        try:
            for batch, reply in zip(batches, self.connector.run_many(calls)):
                stored += per_job(reply, len(batch), Enqueued.from_reply)
            for entry in stored:
                if isinstance(entry, Exception):
                    raise entry
        except ServerUnavailable as exc:
            if isinstance(exc, AccessDenied):  # refused before anything ran
                raise
            raise EnqueueUnknown.of(queue, [job.id for job in jobs], exc) from exc
        return stored

    @staticmethod
    def _enqueue_call(keys: QueueKeys, jobs: Sequence[NewJob]) -> Call:
        idem: list[str] = []
        args: list[Any] = [len(jobs)]
        for job in jobs:
            idem_index = 0
            digest = job.idempotency_digest
            if digest is not None:
                idem.append(digest)
                idem_index = 5 + len(jobs) + len(idem)
            args += (
                job.id, job.payload, job.task, job.priority, job.max_attempts, job.lease_ms,
                job.due_ms, job.run_after, job.result_ttl_ms, job.dead_ttl_ms, idem_index,
                job.timeout_ms, job.limits, job.variant,
            )  # fmt: skip
        enqueue = script.load("enqueue")
        return Call(
            enqueue, enqueue.keys_for(keys, job=[job.id for job in jobs], idempotency=idem), args
        )

    # -- the lease --------------------------------------------------------------

    def claim(self, queue: str, worker_id: str, **options: Any) -> Claim:
        """Lease up to ``count`` jobs, highest priority first, FIFO within a priority
        (``options`` are ``claim_call``'s).

        ``claim_id`` names this claim (unique per queue; default a fresh random id): asking
        again with the same id after a lost reply returns the same jobs, not more.
        ``start_now`` of them are marked started at once (the rest by ``start_many``
        before they run): the reaper charges a crash only to a job that had started.
        A ``solo`` job (see reap.lua) comes alone, in a claim of its own.
        """
        call = self.claim_call(queue, worker_id, **options)
        return Claim.from_reply(queue, self.connector.run(call.script, call.keys, call.args))

    @staticmethod
    def claim_call(
        queue: str,
        worker_id: str,
        *,
        count: int = 1,
        lease_ms: int = DEFAULT_LEASE_MS,
        promote_limit: int = 100,
        claim_id: str | None = None,
        start_now: int = 0,
        isolated: bool = False,
    ) -> Call:
        """``claim``'s script call, checked, to be sent by the caller (a worker's wire);
        its reply is read with ``Claim.from_reply``."""
        keys = QueueKeys.of(queue)
        validate_worker_id(worker_id)
        claim_id = validate_worker_id(claim_id or new_job_id())
        check_int(count, 1, 10_000, "count")
        check_int(lease_ms, 1, MAX_LEASE_MS, "lease_ms")
        check_int(promote_limit, 0, SWEEP_MAX, "promote_limit")  # 0: promote nothing
        check_int(start_now, 0, 10_000, "start_now")
        claim = script.load("claim")
        return Call(
            claim,
            claim.keys_for(keys, claim=claim_id),
            [count, worker_id, lease_ms, promote_limit, start_now, int(isolated), *ROW_FIELDS],
        )

    def start_many(
        self, worker_id: str, items: Sequence[tuple[str, str, int]], *, isolated: bool = False
    ) -> list[Any]:
        """Mark held jobs (queue, id, token) as started, before they run: one call per
        queue, one round trip. Each entry is 1, or the job's ``StaleToken`` (it must not run).
        ``isolated``: they run in child processes (see start.lua)."""
        validate_worker_id(worker_id)
        by_queue: dict[str, list[int]] = {}
        for n, (queue, _, _) in enumerate(items):
            by_queue.setdefault(QueueKeys.of(queue).queue, []).append(n)
        calls, start = [], script.load("start")
        for queue, indexes in by_queue.items():
            keys = QueueKeys.of(queue)
            rows = start.keys_for(keys, job=[items[n][1] for n in indexes])
            tokens = [check_token(items[n][2]) for n in indexes]
            calls.append(Call(start, rows, [worker_id, 1 if isolated else 0, *tokens]))
        replies: list[Any] = [0] * len(items)
        for indexes, reply in zip(by_queue.values(), self.connector.run_many(calls)):
            for n, value in zip(indexes, per_job(reply, len(indexes), int)):
                replies[n] = value
        return replies

    def complete(
        self, queue: str, job_id: str, token: int, result: str = "null", *, ran_us: int = -1
    ) -> int:
        """Retire the job with ``result`` (opaque). Returns finished_at (µs); ``StaleToken`` if not held.

        ``ran_us``: how long ago its run began (stamps started_at / last_attempted_at
        on the server's clock; -1: stamped already)."""
        (reply,) = self.complete_many([(queue, job_id, token, result)], ran_us=[ran_us])
        if isinstance(reply, Exception):
            raise reply
        return reply

    def complete_many(
        self,
        items: Sequence[tuple[str, str, int, str]],
        *,
        ran_us: Sequence[int] | None = None,
        riders: Sequence[Call] = (),
    ) -> list[int | Exception]:
        """Complete many jobs (queue, id, token, result) in one round trip.

        ``ran_us[i]``: how long ago job i's run began (see ``complete``; default -1).
        ``riders``: other script calls sent in the same round trip, their replies
        dropped (the worker's job events, engine/events.py).

        One script call per queue (per BATCH_MAX jobs) retires them all. Each
        entry of the reply, in order, is finished_at (µs) or the job's typed error
        (``StaleToken``); an error of a whole call is given to each of its jobs.
        """
        completing = self.completing(items, ran_us)
        return completing.replies(self.connector.run_many([*completing.calls, *riders]))

    def completing(
        self, items: Sequence[tuple[str, str, int, str]], ran_us: Sequence[int] | None = None
    ) -> Completing:
        """``complete_many``'s script calls, checked, to be sent by the caller (a worker's
        wire); ``replies`` reads their replies as ``complete_many`` returns them."""
        # Ids are checked where the calls are built (QueueKeys.job), before any is sent.
        ago = [-1] * len(items) if ran_us is None else [int(us) for us in ran_us]
        held = [
            (QueueKeys.of(q), i, check_token(t), r, us)
            for (q, i, t, r), us in zip(items, ago, strict=True)
        ]
        by_queue: dict[str, list[int]] = {}
        for n, item in enumerate(held):
            by_queue.setdefault(item[0].queue, []).append(n)
        batches = [
            batch
            for indexes in by_queue.values()
            for batch in in_batches(indexes, lambda n: len(held[n][3]))
        ]
        calls = [self._complete_call([held[n] for n in batch]) for batch in batches]
        return Completing(calls, batches, len(held))

    @staticmethod
    def _complete_call(items: Sequence[tuple[QueueKeys, str, int, str, int]]) -> Call:
        keys = items[0][0]
        complete = script.load("complete")
        return Call(
            complete,
            complete.keys_for(keys, job=[i[1] for i in items]),
            [arg for _, job_id, token, result, us in items for arg in (job_id, token, result, us)],
        )

    def retry(
        self,
        queue: str,
        job_id: str,
        token: int,
        *,
        error: str,
        summary: str,
        backoff_ms: int = 0,
        give_up: bool = False,
        ran_us: int = -1,
    ) -> RetryOutcome:
        """Record a failed attempt (``error`` is one JSON object). Dead past max attempts.

        ``ran_us`` as for ``complete``."""
        keys = QueueKeys.of(queue)
        error_object(error)
        check_int(backoff_ms, 0, MAX_DELAY_MS, "backoff_ms")
        if not isinstance(summary, str):
            raise InvalidJobOptions(f"summary must be a string, not {type(summary).__name__}")
        retry = script.load("retry")
        reply = self.connector.run(
            retry,
            retry.keys_for(keys, job=job_id),
            [job_id, check_token(token), error, summary.splitlines()[0][:500] if summary else "",
             backoff_ms, 1 if give_up else 0, int(ran_us)],
        )  # fmt: skip
        return RetryOutcome(reply[0], int(reply[1]))

    def extend(
        self, queue: str, job_id: str, token: int, lease_ms: int, *, ran_us: int = -1
    ) -> int:
        """Renew the lease to now + lease_ms. Returns the new deadline; ``StaleToken`` if lost.

        ``ran_us`` stamps a run that began that long ago and is not stamped yet."""
        (reply,) = self.extend_many([(queue, job_id, token, lease_ms)], ran_us=[ran_us])
        if isinstance(reply, Exception):
            raise reply
        return int(reply)

    def extend_many(
        self, items: Sequence[tuple[str, str, int, int]], *, ran_us: Sequence[int] | None = None
    ) -> list[Any]:
        """Pipeline many extends (queue, id, token, lease_ms); errors come back as values.

        ``ran_us[i]`` stamps job i's run as for ``extend`` (default -1: no stamp)."""
        ago = [-1] * len(items) if ran_us is None else ran_us
        return self.connector.run_many(
            [self._extend_call(*item, us) for item, us in zip(items, ago, strict=True)]
        )

    @staticmethod
    def _extend_call(queue: str, job_id: str, token: int, lease_ms: int, ran_us: int) -> Call:
        keys = QueueKeys.of(queue)
        check_int(lease_ms, 1, MAX_LEASE_MS, "lease_ms")
        extend = script.load("extend")
        args = [job_id, check_token(token), lease_ms, int(ran_us)]
        return Call(extend, extend.keys_for(keys, job=job_id), args)

    def release(self, queue: str, job_id: str, token: int, *, began: bool = True) -> None:
        """Give the job back to pending at once, refunding the attempt. ``began=False``:
        its run never began (it waited in the read-ahead), so the run its claim recorded
        is taken back too, and Django's attempts (one per run) do not count it."""
        (reply,) = self.release_many([(queue, job_id, token)], began=[began])
        if isinstance(reply, Exception):
            raise reply

    def release_many(
        self,
        items: Sequence[tuple[str, str, int]],
        *,
        solo: bool = False,
        began: Sequence[bool] | None = None,
    ) -> list[Any]:
        """Pipeline many releases (queue, id, token) in one round trip: 1 per job given
        back, ``"cancelled"`` for one an operator cancelled while it ran (dead now), or the job's typed
        error (``StaleToken``) as its entry. ``solo``: they were
        running in a process that died beside each other (see release.lua). ``began[i]``:
        whether job i's run began (default: all did, which never under-counts a run)."""
        ran = [True] * len(items) if began is None else list(began)
        if len(ran) != len(items):
            raise ValueError("began must hold one flag per item")
        return self.connector.run_many(
            [self._release_call(*item, solo, b) for item, b in zip(items, ran)]
        )

    @staticmethod
    def _release_call(queue: str, job_id: str, token: int, solo: bool, began: bool) -> Call:
        keys = QueueKeys.of(queue)
        release = script.load("release")
        return Call(
            release,
            release.keys_for(keys, job=job_id),
            [job_id, check_token(token), 1 if solo else 0, 1 if began else 0],
        )

    def leave_many(self, items: Sequence[tuple[str, str, int]]) -> list[Any]:
        """Mark held jobs (queue, id, token) left at a stop while their runs go on in
        threads: the reaper returns them free once their leases run out (leave.lua).
        One round trip; a job's typed error (``StaleToken``) as its entry."""
        leave = script.load("leave")
        calls = [Call(leave, leave.keys_for(QueueKeys.of(q), job=i), [i, check_token(t)])
                 for q, i, t in items]  # fmt: skip
        return self.connector.run_many(calls)

    def crashed(
        self,
        queue: str,
        job_id: str,
        token: int,
        *,
        why: str,
        crash_budget: int = DEFAULT_CRASH_BUDGET,
        ran_us: int = -1,
    ) -> RetryOutcome:
        """Report that the job's process died while it ran alone: a crash charged to it,
        dead at ``crash_budget`` (see crashed.lua). ``StaleToken`` if not held."""
        keys = QueueKeys.of(queue)
        check_int(crash_budget, 1, MAX_CRASH_BUDGET, "crash_budget")
        crashed = script.load("crashed")
        reply = self.connector.run(
            crashed,
            crashed.keys_for(keys, job=job_id),
            [job_id, check_token(token), crash_budget, one_line(why, "why", 300), int(ran_us)],
        )
        return RetryOutcome(reply[0], int(reply[1]))
