"""The leased state machine: every operation is exactly one script call.

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
    delete, trim;  fire and the schedule_* scripts: see scheduler.py

Reads (a row, the counts, a page of a place) are plain reads or read-only scripts.
The only writes outside scripts are the queue registry (a SET outside any queue's
slot, so it can never be part of a transition).
"""

# Over ~400 lines: the Job row and its reader, the NewJob validator and the Jobs facade (one
# method per transition) are three concepts due to be three modules (issue 18).

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import script
from .connector import Call, Connector, translate_error
from .errors import CorruptRow, InvalidJobOptions, PayloadTooLarge, ScriptError
from .keyspace import (
    QUEUES_KEY,
    STATES,
    QueueKeys,
    new_job_id,
    validate_job_id,
    validate_worker_id,
)
from .limits import GateState, validate_limits

T = TypeVar("T")
MIN_PRIORITY, MAX_PRIORITY = -100, 100
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_LEASE_MS = 30_000
DEFAULT_RESULT_TTL_MS = 24 * 3600 * 1000
DEFAULT_DEAD_TTL_MS = 7 * 24 * 3600 * 1000
DEFAULT_MAX_PAYLOAD = 512 * 1024
MAX_LEASE_MS = 7 * 24 * 3600 * 1000
# A job whose worker died while it ran alone this many times is dead (WorkerCrashed):
# two is bad luck (a deploy's SIGKILL, a host lost), three in a row is the job.
DEFAULT_CRASH_BUDGET = 3
SWEEP_LIMIT = 1000  # jobs per reap/promote/trim call: no script blocks the server for long
SWEEP_MAX = 10_000  # the most a caller may ask per call (0 or less would mean "no bound" to Lua)
PAGE_MAX = 500
# A batched enqueue/complete script call carries at most this many jobs, and
# payloads/results of at most about this many bytes: its run time blocks the server.
BATCH_MAX = 500
BATCH_BYTES = 1 << 20
# The longest retention or retry delay (~34 years): now + it stays an exact integer that
# Lua's '%d' can format (a larger one wrapped to a negative score: due at once).
MAX_DELAY_MS = 2**40


def _int(value: object, minimum: int, maximum: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJobOptions(f"{name} must be an integer, not {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise InvalidJobOptions(f"{name} must be between {minimum} and {maximum}, not {value}")
    return value


def _one_line(value: object, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidJobOptions(f"{name} must be a string, not {type(value).__name__}")
    if len(value) > limit or any(ch in value for ch in '\r\n"\\') or not value.isprintable():
        raise InvalidJobOptions(
            f"{name} must be one printable line without quotes or backslashes, "
            f"at most {limit} characters"
        )
    return value


def _utf8(value: str, name: str) -> bytes:
    """``value`` as the bytes the server will hold; a lone surrogate is bad input, not a crash."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidJobOptions(
            f"{name} is not valid Unicode text: lone surrogate at position {exc.start}"
        ) from None


ERROR_MAX_BYTES = 64 * 1024  # one error record; the worker's are bounded well below (outcome.py)


def _error_object(error: object) -> str:
    """``error`` if it is one JSON object: Lua splices it as is into the row's errors array."""
    if isinstance(error, str) and len(error) > ERROR_MAX_BYTES:
        raise InvalidJobOptions(
            f"error is {len(error)} characters, over the limit of {ERROR_MAX_BYTES}"
        )
    try:
        ok = isinstance(error, str) and isinstance(json.loads(error), dict)
    except (ValueError, RecursionError):
        ok = False
    if not ok:
        raise InvalidJobOptions('error must be one JSON object, e.g. {"exception_class_path": ...}')
    return error


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob:
    """What enqueue stores. ``payload`` is opaque to the engine (the Django layer's JSON)."""

    payload: str
    task: str = ""
    id: str = field(default_factory=new_job_id)
    priority: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    lease_ms: int = 0  # 0: the worker's default lease
    due_ms: int = 0  # absolute Unix ms; 0 or past: ready now
    run_after: str = ""  # the caller's exact value, kept opaque (e.g. an ISO datetime)
    result_ttl_ms: int = DEFAULT_RESULT_TTL_MS
    dead_ttl_ms: int = DEFAULT_DEAD_TTL_MS
    idempotency_key: str | None = None
    timeout_ms: int = 0  # 0: no time limit of its own (the worker's cap may still apply)
    limits: str = ""  # its flow-control gates (engine/limits.py); "": none
    # The idempotency key's variant (at most one; both need a key): throttle, one job
    # per key per window whatever its state; debounce, the key's waiting job takes
    # this payload and runs this long after the last enqueue.
    throttle_ms: int = 0
    debounce_ms: int = 0

    def validate(self, max_payload: int = DEFAULT_MAX_PAYLOAD) -> NewJob:
        """Raise a typed error for any bad field; nothing has been sent yet."""
        if not isinstance(self.payload, str):
            raise InvalidJobOptions(f"payload must be a str, not {type(self.payload).__name__}")
        size = len(_utf8(self.payload, "payload"))
        if size > max_payload:
            raise PayloadTooLarge(f"payload is {size} bytes, over the limit of {max_payload}")
        validate_job_id(self.id)
        if self.task:
            _one_line(self.task, "task", 500)
        _int(self.priority, MIN_PRIORITY, MAX_PRIORITY, "priority")
        _int(self.max_attempts, 1, 1_000_000, "max_attempts")
        _int(self.lease_ms, 0, MAX_LEASE_MS, "lease_ms")
        _int(self.timeout_ms, 0, MAX_LEASE_MS, "timeout_ms")
        _int(self.due_ms, 0, 2**52, "due_ms")
        _int(self.result_ttl_ms, 0, MAX_DELAY_MS, "result_ttl_ms")
        _int(self.dead_ttl_ms, 0, MAX_DELAY_MS, "dead_ttl_ms")
        if not isinstance(self.run_after, str) or len(self.run_after) > 100:
            raise InvalidJobOptions("run_after must be a string of at most 100 characters")
        _utf8(self.run_after, "run_after")
        if self.idempotency_key is not None:
            key = self.idempotency_key
            if not isinstance(key, str) or not 0 < len(key) <= 1000:
                raise InvalidJobOptions("idempotency_key must be a non-empty string (≤ 1000 chars)")
            _utf8(key, "idempotency_key")
        validate_limits(self.limits)
        _int(self.throttle_ms, 0, MAX_DELAY_MS, "throttle_ms")
        _int(self.debounce_ms, 0, MAX_DELAY_MS, "debounce_ms")
        if (self.throttle_ms or self.debounce_ms) and self.idempotency_key is None:
            raise InvalidJobOptions("throttle and debounce need an idempotency key")
        if self.throttle_ms and self.debounce_ms:
            raise InvalidJobOptions("a job is throttled or debounced, not both")
        return self

    @property
    def variant(self) -> str:
        """The key's variant as enqueue.lua reads it."""
        if self.throttle_ms:
            return f"t{self.throttle_ms}"
        return f"d{self.debounce_ms}" if self.debounce_ms else ""


@dataclass(frozen=True, slots=True)
class Enqueued:
    id: str
    state: str
    created: bool  # False: an idempotency key matched a job (see enqueue.lua)
    enqueued_at: int | None = None  # the row's enqueued_at (server µs)
    debounced: bool = False  # the key's waiting job took this payload (created False)

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> Enqueued:
        at = int(reply[3]) if reply[3] else None
        return cls(reply[0], reply[1], reply[2] == 1, at, reply[2] == 2)


@dataclass(slots=True)
class Job:
    """A row as read from the server. Timestamps: ``*_at`` in µs, ``*_ms`` in ms (server clock).

    A snapshot, to be read, never changed. Not ``frozen``: a frozen dataclass sets
    each of these 24 fields through ``object.__setattr__``, 2.4 µs per row against
    0.6, and a worker builds one for every job it claims.
    """

    queue: str
    id: str
    state: str
    payload: str
    task: str
    priority: int
    attempts: int  # the fencing token of the current (or last) lease
    refunds: int
    max_attempts: int
    lease_ms: int
    enqueued_at: int | None
    started_at: int | None
    last_attempted_at: int | None
    finished_at: int | None
    due_ms: int | None
    lease_deadline: int | None
    run_after: str
    worker: str
    worker_ids: tuple[str, ...]
    errors: str  # JSON array of {"exception_class_path", "traceback"}, opaque to Lua
    last_error: str
    result: str | None
    result_ttl_ms: int | None
    idempotency_key: str  # the SHA-256 hex digest of the caller's key ("" without one)
    timeout_ms: int = 0  # the job's own time limit (0: none)
    crashes: int = 0  # times its worker died while it ran alone (reap.lua)
    solo: bool = False  # claimed and run alone: it was running when a worker died
    started: bool = False  # this lease's run may have begun (marked by claim or start)
    limits: str = ""  # its flow-control gates (engine/limits.py)

    @property
    def token(self) -> int:
        return self.attempts

    @property
    def counted_attempts(self) -> int:
        """Attempts that count against ``max_attempts``.

        ``attempts`` only grows (it is the fencing token); a released lease and an
        operator's retry of a dead job add to ``refunds`` instead of lowering it.
        """
        return self.attempts - self.refunds

    @property
    def error_list(self) -> list[dict[str, Any]]:
        try:
            errors = json.loads(self.errors or "[]")
        except (ValueError, RecursionError):  # planted text, or JSON nested past any reason
            return [{"exception_class_path": "?", "traceback": self.errors[:10_000]}]
        return errors if isinstance(errors, list) else []

    @classmethod
    def from_row(cls, queue: str, row: Mapping[str, str]) -> Job:
        """Read a row (its HGETALL); raise ``CorruptRow`` naming the field when it cannot be a job."""
        if not row:
            raise CorruptRow("the row is empty")
        return cls.from_values(queue, [row.get(name) for name in ROW_FIELDS])

    @classmethod
    def from_values(cls, queue: str, values: Sequence[str | None]) -> Job:
        """Read a row given as its ``ROW_FIELDS`` values in order (None: absent), as the
        claim script returns it: no field names on the wire, no dict per claimed job.

        Bytes that are not UTF-8 arrive escaped (``connector.READ_ERRORS``): such text
        is no job's valid payload, task path or number, so the row is refused by
        whoever reads that field (``CorruptRow`` here for a number).
        """
        job_id, state, payload = values[_ID], values[_STATE], values[_PAYLOAD]
        for name, value in (("id", job_id), ("state", state), ("payload", payload)):
            if value is None:
                raise CorruptRow(f"the row has no {name!r} field")
        if state not in STATES:
            raise CorruptRow(f"unknown state {state[:40]!r}")
        (
            priority, attempts, refunds, max_attempts, lease_ms, enqueued_at, started_at,
            last_attempted_at, finished_at, due_ms, lease_deadline, result_ttl_ms,
            timeout_ms, crashes, run,
        ) = _ints(values)  # fmt: skip
        workers = values[_WORKER_IDS]
        return cls(
            queue=queue,
            id=job_id,
            state=state,
            payload=payload,
            task=values[_TASK] or "",
            priority=priority or 0,
            attempts=attempts or 0,
            refunds=refunds or 0,
            max_attempts=max_attempts or DEFAULT_MAX_ATTEMPTS,
            lease_ms=lease_ms or 0,
            enqueued_at=enqueued_at,
            started_at=started_at,
            last_attempted_at=last_attempted_at,
            finished_at=finished_at,
            due_ms=due_ms,
            lease_deadline=lease_deadline,
            result_ttl_ms=result_ttl_ms,
            run_after=values[_RUN_AFTER] or "",
            worker=values[_WORKER] or "",
            worker_ids=tuple(workers.split("\n")) if workers else (),
            errors=values[_ERRORS] or "",
            last_error=values[_LAST_ERROR] or "",
            result=values[_RESULT],
            idempotency_key=values[_IDEM] or "",
            timeout_ms=timeout_ms or 0,
            crashes=crashes or 0,
            solo=values[_SOLO] == "1",
            started=run is not None and run == attempts,
            limits=values[_LIMITS] or "",
        )


# A row's fields in the order the claim script returns them ('idem' holds the
# idempotency key's digest; 'run' the token of the lease whose run began; 'solo'
# marks a job that must run alone, see reap.lua; 'limits' its gates, see claim.lua).
ROW_FIELDS = (
    "id", "state", "payload", "task", "run_after", "worker", "worker_ids", "errors",
    "last_error", "result", "idem", "solo", "limits",
    "priority", "attempts", "refunds", "max_attempts", "lease_ms", "enqueued_at", "started_at",
    "last_attempted_at", "finished_at", "due_ms", "lease_deadline", "result_ttl_ms",
    "timeout_ms", "crashes", "run",
)  # fmt: skip
(
    _ID, _STATE, _PAYLOAD, _TASK, _RUN_AFTER, _WORKER, _WORKER_IDS, _ERRORS,
    _LAST_ERROR, _RESULT, _IDEM, _SOLO, _LIMITS,
) = range(13)  # fmt: skip
_INT_FIELDS = ROW_FIELDS[13:]  # the integer fields, priority .. run (from_values unpacks them)
assert _INT_FIELDS == (
    "priority", "attempts", "refunds", "max_attempts", "lease_ms", "enqueued_at", "started_at",
    "last_attempted_at", "finished_at", "due_ms", "lease_deadline", "result_ttl_ms",
    "timeout_ms", "crashes", "run",
)  # fmt: skip
_ATTEMPTS = ROW_FIELDS.index("attempts")


def _ints(values: Sequence[str | None]) -> list[int | None]:
    """The integer fields (``_INT_FIELDS``, in order; None when absent or empty);
    ``CorruptRow`` names one that is not an integer."""
    raw = values[13:]
    try:
        return [int(v) if v else None for v in raw]
    except ValueError:
        for name, v in zip(_INT_FIELDS, raw, strict=True):
            try:
                int(v or 0)
            except ValueError:
                raise CorruptRow(f"field {name!r} is not an integer: {v[:40]!r}") from None
        raise


@dataclass(frozen=True, slots=True)
class Claimed:
    """A job handed to a worker, or the row that could not be read (``job`` None)."""

    queue: str
    id: str
    token: int
    job: Job | None
    corrupt: str = ""  # why the row could not be read


@dataclass(frozen=True, slots=True)
class Claim:
    now_ms: int  # the server's clock at the claim
    next_due_ms: int | None  # the earliest scheduled job, or held-back gate, still waiting
    jobs: list[Claimed]


@dataclass(frozen=True, slots=True)
class RetryOutcome:
    state: str  # 'pending', 'scheduled' or 'dead'
    due_ms: int


@dataclass(frozen=True, slots=True)
class Sweep:
    """The outcome of a bounded sweep loop (reap, promote, trim, retry_dead)."""

    moved: int = 0
    dead: int = 0
    dangling: int = 0
    calls: int = 0


Progress = Callable[[Sweep], None]
"""Called after each bounded call of a sweep loop with the totals so far (a CLI's progress bar)."""


@dataclass(frozen=True, slots=True)
class QueueStats:
    queue: str
    now_ms: int
    counts: dict[str, int]
    metrics: dict[str, int]


@dataclass(frozen=True, slots=True)
class PageEntry:
    id: str
    score: float
    fields: dict[str, str | None]


@dataclass(frozen=True, slots=True)
class Page:
    total: int
    entries: list[PageEntry]


def _plain(command: Callable[[], Any]) -> Any:
    """A plain (non-script) command, its redis-py errors mapped as a script call's are."""
    try:
        return command()
    except Exception as exc:
        raise translate_error(exc) from exc


def _pairs(flat: Sequence[Any]) -> dict[str, Any]:
    return dict(zip(flat[::2], flat[1::2]))


class Jobs:
    """The engine API over one connector. Thread-safe; one per process is enough."""

    def __init__(self, connector: Connector, *, max_payload: int = DEFAULT_MAX_PAYLOAD) -> None:
        self.connector = connector
        self.max_payload = max_payload
        self._registered: set[str] = set()
        self._lock = threading.Lock()

    # -- registry (plain commands: outside every queue's slot) -----------------

    def register_queue(self, queue: str) -> None:
        """Record ``queue`` in the registry once per process, so reapers find it."""
        keys = QueueKeys.of(queue)
        if keys.queue in self._registered:
            return
        _plain(lambda: self.connector.client.sadd(QUEUES_KEY, keys.queue))
        with self._lock:
            self._registered.add(keys.queue)

    def queues(self) -> list[str]:
        """Queue names found in the registry (validated: a planted bad name is skipped)."""
        names = []
        for name in _plain(lambda: self.connector.client.smembers(QUEUES_KEY)):
            try:
                names.append(QueueKeys.of(name).queue)
            except ValueError:
                continue
        return sorted(names)

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
        batches = _batches(jobs, lambda job: len(job.payload))
        calls = [self._enqueue_call(keys, batch) for batch in batches]
        stored: list[Any] = []
        for batch, reply in zip(batches, self.connector.run_many(calls)):
            stored += _per_job(reply, len(batch), Enqueued.from_reply)
        for entry in stored:
            if isinstance(entry, Exception):
                raise entry
        return stored

    @staticmethod
    def _enqueue_call(keys: QueueKeys, jobs: Sequence[NewJob]) -> Call:
        rows = [keys.job(job.id) for job in jobs]
        idem: list[str] = []
        args: list[Any] = [len(jobs)]
        for job in jobs:
            idem_index = 0
            if job.idempotency_key is not None:
                digest = hashlib.sha256(job.idempotency_key.encode()).hexdigest()
                idem.append(keys.idempotency(digest))
                idem_index = 5 + len(jobs) + len(idem)
            args += (
                job.id, job.payload, job.task, job.priority, job.max_attempts, job.lease_ms,
                job.due_ms, job.run_after, job.result_ttl_ms, job.dead_ttl_ms, idem_index,
                job.timeout_ms, job.limits, job.variant,
            )  # fmt: skip
        key_list = [keys.pending, keys.scheduled, keys.seq, keys.metrics, keys.wake, *rows, *idem]
        return Call(script.load("enqueue"), key_list, args)

    # -- the lease --------------------------------------------------------------

    def claim(
        self,
        queue: str,
        worker_id: str,
        *,
        count: int = 1,
        lease_ms: int = DEFAULT_LEASE_MS,
        promote_limit: int = 100,
        claim_id: str | None = None,
        start_now: int = 0,
        isolated: bool = False,
    ) -> Claim:
        """Lease up to ``count`` jobs, highest priority first, FIFO within a priority.

        ``claim_id`` names this claim (unique per queue; default a fresh random id): asking
        again with the same id after a lost reply returns the same jobs, not more.
        ``start_now`` of them are marked started at once (the rest by ``start_many``
        before they run): the reaper charges a crash only to a job that had started.
        A ``solo`` job (see reap.lua) comes alone, in a claim of its own.
        """
        keys = QueueKeys.of(queue)
        validate_worker_id(worker_id)
        claim_id = validate_worker_id(claim_id or new_job_id())
        _int(count, 1, 10_000, "count")
        _int(lease_ms, 1, MAX_LEASE_MS, "lease_ms")
        _int(promote_limit, 0, SWEEP_MAX, "promote_limit")  # 0: promote nothing
        _int(start_now, 0, 10_000, "start_now")
        reply = self.connector.run(
            script.load("claim"),
            [
                keys.pending,
                keys.scheduled,
                keys.active,
                keys.seq,
                keys.metrics,
                keys.wake,
                keys.dead,
                keys.claim(claim_id),
            ],
            [count, worker_id, lease_ms, promote_limit, start_now, int(isolated), *ROW_FIELDS],
        )
        now_ms, next_due = int(reply[0]), int(reply[1])
        return Claim(
            now_ms, None if next_due < 0 else next_due, [_claimed(queue, r) for r in reply[2:]]
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
        calls = []
        for queue, indexes in by_queue.items():
            keys = QueueKeys.of(queue)
            rows = [keys.job(items[n][1]) for n in indexes]
            tokens = [int(items[n][2]) for n in indexes]
            args = [worker_id, 1 if isolated else 0, *tokens]
            calls.append(Call(script.load("start"), [keys.active, *rows], args))
        replies: list[Any] = [0] * len(items)
        for indexes, reply in zip(by_queue.values(), self.connector.run_many(calls)):
            for n, value in zip(indexes, _per_job(reply, len(indexes), int)):
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
        # Ids are checked where the calls are built (QueueKeys.job), before any is sent.
        ago = [-1] * len(items) if ran_us is None else [int(us) for us in ran_us]
        items = [
            (QueueKeys.of(q), i, int(t), r, us) for (q, i, t, r), us in zip(items, ago, strict=True)
        ]
        by_queue: dict[str, list[int]] = {}
        for n, item in enumerate(items):
            by_queue.setdefault(item[0].queue, []).append(n)
        batches = [
            batch
            for indexes in by_queue.values()
            for batch in _batches(indexes, lambda n: len(items[n][3]))
        ]
        calls = [self._complete_call([items[n] for n in batch]) for batch in batches]
        replies: list[int | Exception] = [0] * len(items)
        for batch, reply in zip(batches, self.connector.run_many([*calls, *riders])):
            for n, value in zip(batch, _per_job(reply, len(batch), int)):
                replies[n] = value
        return replies

    @staticmethod
    def _complete_call(items: Sequence[tuple[QueueKeys, str, int, str, int]]) -> Call:
        keys = items[0][0]
        return Call(
            script.load("complete"),
            [keys.active, keys.completed, keys.metrics, *(keys.job(i[1]) for i in items)],
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
        _error_object(error)
        _int(backoff_ms, 0, MAX_DELAY_MS, "backoff_ms")
        if not isinstance(summary, str):
            raise InvalidJobOptions(f"summary must be a string, not {type(summary).__name__}")
        reply = self.connector.run(
            script.load("retry"),
            [keys.active, keys.pending, keys.scheduled, keys.dead, keys.seq, keys.metrics,
             keys.wake, keys.job(job_id)],
            [job_id, int(token), error, summary.splitlines()[0][:500] if summary else "",
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
        _int(lease_ms, 1, MAX_LEASE_MS, "lease_ms")
        return Call(
            script.load("extend"),
            [keys.active, keys.job(job_id)],
            [job_id, int(token), lease_ms, int(ran_us)],
        )

    def release(self, queue: str, job_id: str, token: int) -> None:
        """Give the job back to pending at once, refunding the attempt."""
        (reply,) = self.release_many([(queue, job_id, token)])
        if isinstance(reply, Exception):
            raise reply

    def release_many(
        self, items: Sequence[tuple[str, str, int]], *, solo: bool = False
    ) -> list[Any]:
        """Pipeline many releases (queue, id, token) in one round trip: 1 per job given
        back, or the job's typed error (``StaleToken``) as its entry. ``solo``: they were
        running in a process that died beside each other (see release.lua)."""
        return self.connector.run_many([self._release_call(*item, solo) for item in items])

    @staticmethod
    def _release_call(queue: str, job_id: str, token: int, solo: bool) -> Call:
        keys = QueueKeys.of(queue)
        return Call(
            script.load("release"),
            [keys.active, keys.pending, keys.seq, keys.metrics, keys.wake, keys.job(job_id)],
            [job_id, int(token), 1 if solo else 0],
        )

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
        _int(crash_budget, 1, 1_000_000, "crash_budget")
        reply = self.connector.run(
            script.load("crashed"),
            [keys.active, keys.pending, keys.dead, keys.seq, keys.metrics, keys.wake,
             keys.job(job_id)],
            [job_id, int(token), crash_budget, _one_line(why, "why", 300), int(ran_us)],
        )  # fmt: skip
        return RetryOutcome(reply[0], int(reply[1]))

    # -- sweeps (bounded per call; loop until done) -------------------------------

    def reap(
        self, queue: str, *, limit: int = SWEEP_LIMIT, crash_budget: int = DEFAULT_CRASH_BUDGET
    ) -> Sweep:
        """Expired leases back to pending (free unless the job crashed its worker running
        alone), or dead once such crashes reach ``crash_budget``. See reap.lua."""
        keys = QueueKeys.of(queue)
        _int(limit, 1, SWEEP_MAX, "limit")
        _int(crash_budget, 1, 1_000_000, "crash_budget")
        moved = dead = dangling = calls = 0
        while True:
            r = self.connector.run(
                script.load("reap"),
                [keys.active, keys.pending, keys.dead, keys.seq, keys.metrics, keys.wake],
                [limit, crash_budget],
            )
            moved, dead, dangling, calls = moved + r[0], dead + r[1], dangling + r[2], calls + 1
            if not r[3]:
                return Sweep(moved, dead, dangling, calls)

    def promote(self, queue: str, *, limit: int = SWEEP_LIMIT) -> Sweep:
        """Due scheduled jobs to pending."""
        keys = QueueKeys.of(queue)
        _int(limit, 1, SWEEP_MAX, "limit")
        return self._loop(
            script.load("promote"), [keys.pending, keys.scheduled, keys.seq, keys.wake], [limit]
        )

    def trim(
        self,
        queue: str,
        state: str,
        *,
        purge: bool = False,
        limit: int = SWEEP_LIMIT,
        progress: Progress | None = None,
    ) -> Sweep:
        """Drop completed or dead rows past their retention (``purge``: all of them)."""
        if state not in ("completed", "dead"):
            raise InvalidJobOptions("only the completed and dead sets can be trimmed or purged")
        keys = QueueKeys.of(queue)
        _int(limit, 1, SWEEP_MAX, "limit")
        return self._loop(
            script.load("trim"),
            [keys.state_set(state), keys.metrics],
            [limit, "+inf" if purge else "now", "purged" if purge else "trimmed"],
            progress,
        )

    def retry_dead(
        self,
        queue: str,
        job_ids: Sequence[str] = (),
        *,
        limit: int = SWEEP_LIMIT,
        progress: Progress | None = None,
    ) -> Sweep:
        """Dead jobs back to pending with a fresh attempt budget (all of them if no ids).

        Given ids go ``limit`` per call, like the sweep: a script stays bounded
        however many ids an operator selects.
        """
        keys = QueueKeys.of(queue)
        _int(limit, 1, SWEEP_MAX, "limit")
        ids = [validate_job_id(j) for j in job_ids]
        call_keys = [keys.dead, keys.pending, keys.seq, keys.metrics, keys.wake]
        if not ids:
            return self._loop(script.load("retry_dead"), call_keys, [limit], progress)
        moved = calls = 0
        for start in range(0, len(ids), limit):
            chunk = ids[start : start + limit]
            moved += self.connector.run(script.load("retry_dead"), call_keys, [limit, *chunk])[0]
            calls += 1
            if progress is not None:
                progress(Sweep(moved=moved, calls=calls))
        return Sweep(moved=moved, calls=calls)

    def _loop(
        self, s: script.Script, keys: list[str], args: list[Any], progress: Progress | None = None
    ) -> Sweep:
        moved = calls = 0
        while True:
            done, more = self.connector.run(s, keys, args)
            moved, calls = moved + done, calls + 1
            if progress is not None:
                progress(Sweep(moved=moved, calls=calls))
            if not more:
                return Sweep(moved=moved, calls=calls)

    # -- operator actions on one job -----------------------------------------------

    def run_now(self, queue: str, job_id: str) -> None:
        keys = QueueKeys.of(queue)
        self.connector.run(
            script.load("run_now"),
            [keys.pending, keys.scheduled, keys.seq, keys.wake, keys.job(job_id)],
            [job_id],
        )

    def cancel(self, queue: str, job_id: str, reason: str = "cancelled by an operator") -> str:
        """Stop the job: 'dead' at once if it waits; 'cancelling' if it runs (its worker
        stops it within about a second and sends it to dead; see cancel.lua)."""
        keys = QueueKeys.of(queue)
        _one_line(reason, "reason", 200)
        return self.connector.run(
            script.load("cancel"),
            [keys.pending, keys.scheduled, keys.dead, keys.metrics, keys.job(job_id)],
            [job_id, reason],
        )

    def delete(self, queue: str, job_id: str) -> str:
        """Remove the job and its row, whatever its state. Returns the state it was in."""
        keys = QueueKeys.of(queue)
        sets = [keys.state_set(s) for s in STATES]
        return self.connector.run(
            script.load("delete"), [*sets, keys.metrics, keys.job(job_id)], [job_id]
        )

    # -- reads ---------------------------------------------------------------------

    def get(self, queue: str, job_id: str) -> Job | None:
        """The row, or None. Raises ``CorruptRow`` for a row that cannot be a job."""
        keys = QueueKeys.of(queue)
        row = _plain(lambda: self.connector.client.hgetall(keys.job(job_id)))
        return Job.from_row(queue, row) if row else None

    def find(self, queues: Sequence[str], job_id: str) -> Job | None:
        """The row of ``job_id`` in the first of ``queues`` that holds it (an id does not
        name its queue): one round trip, a pipeline of reads. ``CorruptRow`` as ``get``."""
        validate_job_id(job_id)
        queues = list(queues)
        pipe = self.connector.client.pipeline(transaction=False)
        for queue in queues:
            pipe.hgetall(QueueKeys.of(queue).job(job_id))
        rows = _plain(pipe.execute)
        for queue, row in zip(queues, rows, strict=True):
            if row:
                return Job.from_row(queue, row)
        return None

    def stats(self, queue: str) -> QueueStats:
        keys = QueueKeys.of(queue)
        reply = self.connector.run(
            script.load("stats"), [*(keys.state_set(s) for s in STATES), keys.metrics]
        )
        counts = dict(zip(STATES, (int(n) for n in reply[1:6])))
        metrics = {k: n for k, v in _pairs(reply[6]).items() if (n := _counter(v)) is not None}
        return QueueStats(queue, int(reply[0]), counts, metrics)

    def limits(self, queue: str, most: int = 100) -> list[GateState]:
        """The queue's rate limits and caps now (one read-only script): tokens or running
        count, and the jobs held back on each. Keyed caps are listed while in use."""
        _int(most, 1, 1000, "most")
        reply = self.connector.run(script.load("limit_stats"), [QueueKeys.of(queue).limits], [most])
        gates = []
        for name, spec, level, waiting in reply:
            kind, _, scope = name.partition(":")
            gates.append(GateState(name, spec, kind, scope, float(level), int(waiting)))
        return sorted(gates, key=lambda gate: gate.name)

    def throughput(self, queue: str, minutes: int = 60) -> list[tuple[int, int, int]]:
        """(unix minute, completed, failed) for the last ``minutes`` minutes, oldest first.

        ``failed`` counts failed attempts (retried or dead-lettered).
        """
        keys = QueueKeys.of(queue)
        _int(minutes, 1, 120, "minutes")
        now_s, _ = _plain(self.connector.client.time)
        last = int(now_s) // 60
        span = range(last - minutes + 1, last + 1)
        pipe = self.connector.client.pipeline(transaction=False)
        for minute in span:
            pipe.hmget(keys.throughput(minute), "completed", "failed")
        return [
            (minute, _counter(done) or 0, _counter(failed) or 0)
            for minute, (done, failed) in zip(span, _plain(pipe.execute))
        ]

    def page(
        self,
        queue: str,
        state: str,
        *,
        offset: int = 0,
        count: int = 50,
        newest_first: bool = False,
        fields: Sequence[str] = ("task", "attempts", "max_attempts", "enqueued_at", "last_error"),
    ) -> Page:
        """One page of a place's sorted set: never reads the whole set."""
        keys = QueueKeys.of(queue)
        _int(offset, 0, 2**40, "offset")
        _int(count, 1, PAGE_MAX, "count")
        reply = self.connector.run(
            script.load("page"),
            [keys.state_set(state)],
            [offset, count, 1 if newest_first else 0, *fields],
        )
        entries = [
            PageEntry(e[0], float(e[1]), dict(zip(fields, e[2:], strict=False))) for e in reply[1:]
        ]
        return Page(int(reply[0]), entries)


def _counter(value: str | None) -> int | None:
    """A counter as the scripts write it (an integer), or None for planted text."""
    if value is None or not value.isascii():
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _batches(items: Sequence[T], size: Callable[[T], int]) -> list[list[T]]:
    """``items`` in order, cut into script calls of at most BATCH_MAX and ~BATCH_BYTES."""
    batches: list[list[T]] = []
    current: list[T] = []
    total = 0
    for item in items:
        n = size(item)
        if current and (len(current) == BATCH_MAX or total + n > BATCH_BYTES):
            batches.append(current)
            current, total = [], 0
        current.append(item)
        total += n
    if current:
        batches.append(current)
    return batches


def _per_job(reply: Any, n: int, parse: Callable[[Any], Any]) -> list[Any]:
    """A batch script's reply as one value per job: its entry parsed, its typed error,
    or the whole call's error."""
    if isinstance(reply, Exception):
        return [reply] * n
    if not isinstance(reply, list) or len(reply) != n:
        return [ScriptError(f"expected {n} entries from a batch script, got {reply!r:.80}")] * n
    return [translate_error(r) if isinstance(r, Exception) else parse(r) for r in reply]


def _claimed(queue: str, values: Sequence[str | None]) -> Claimed:
    token = int(values[_ATTEMPTS])  # the script's HINCRBY made it an integer
    try:
        return Claimed(queue, values[0] or "", token, Job.from_values(queue, values))
    except CorruptRow as exc:
        return Claimed(queue, values[0] or "", token, None, str(exc))
