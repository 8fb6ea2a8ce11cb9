"""A job's row (the HASH ``emq:{q}:job:<id>``) as the engine reads it.

``ROW_FIELDS`` is the single list of the fields a reader gets: the claim script
returns them in its order (no names on the wire), and ``Job.from_values`` unpacks
them in that order (a worker reads hundreds of rows per claim): adding a field is a
line here and a name in that unpacking, which tests/engine/test_rows.py holds to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .bounds import DEFAULT_MAX_ATTEMPTS
from .errors import CorruptRow
from .json_text import read_json
from .keyspace import STATES

# Text fields ('idem' holds the idempotency key's digest; 'solo' marks a job that must
# run alone, see reap.lua; 'limits' its gates, see claim.lua) and integer fields ('run':
# the token of the lease whose run began).
TEXT_FIELDS = (
    "id", "state", "payload", "task", "run_after", "worker", "worker_ids", "errors",
    "last_error", "result", "idem", "solo", "limits",
)  # fmt: skip
INT_FIELDS = (
    "priority", "attempts", "refunds", "max_attempts", "lease_ms", "enqueued_at", "started_at",
    "last_attempted_at", "finished_at", "due_ms", "lease_deadline", "result_ttl_ms",
    "timeout_ms", "crashes", "run",
)  # fmt: skip
ROW_FIELDS = TEXT_FIELDS + INT_FIELDS
AT = {name: index for index, name in enumerate(ROW_FIELDS)}  # a field's place in a reply


def counted_attempts(attempts: int, refunds: int) -> int:
    """Attempts that count against ``max_attempts``: the one definition (common.lua's
    ``used_attempts`` is its server side).

    ``attempts`` only grows (it is the fencing token); a released lease and an
    operator's retry of a dead job add to ``refunds`` instead of lowering it.
    """
    return attempts - refunds


def counted_attempts_of(fields: Mapping[str, str | None]) -> int | None:
    """``counted_attempts`` of a page entry's fields ('attempts' and 'refunds'); None when
    its attempts are absent or not a number (a planted row)."""
    try:
        attempts = int(fields.get("attempts") or "")
        refunds = int(fields.get("refunds") or 0)
    except ValueError:
        return None
    return counted_attempts(attempts, refunds)


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
        """Attempts that count against ``max_attempts`` (see ``counted_attempts``)."""
        return counted_attempts(self.attempts, self.refunds)

    @property
    def error_list(self) -> list[dict[str, Any]]:
        try:
            errors = read_json(self.errors or "[]")
        except ValueError:  # planted text, or JSON nested past any reason
            return [{"exception_class_path": "?", "traceback": self.errors[:10_000]}]
        return errors if isinstance(errors, list) else []

    @property
    def error_records(self) -> list[dict[str, Any]]:
        """``error_list`` as records a page or a table can show whatever was planted: each
        has ``exception_class_path``, ``traceback`` and ``worker`` (text, "" when absent)
        and ``at_us`` (an int or None). A plain string, a record without a class path, a
        number were each a 500 on the job's page; the raw text when nothing parses."""
        try:
            errors = self.error_list
        except RecursionError:  # planted JSON nested past what the parser takes
            errors = [{"exception_class_path": "?", "traceback": self.errors}]
        return [_record(e if isinstance(e, dict) else {"traceback": e}) for e in errors]

    @classmethod
    def from_row(cls, queue: str, row: Mapping[str, str | None]) -> Job:
        """Read a row (its HGETALL); raise ``CorruptRow`` naming the field when it cannot be a job."""
        if not row:
            raise CorruptRow("the row is empty")
        return cls.from_values(queue, [row.get(name) for name in ROW_FIELDS])

    @classmethod
    def of_key(cls, queue: str, job_id: str, row: Mapping[str, str | None]) -> Job:
        """``from_row`` of the row at job ``job_id``'s key, which must hold that id:
        ``CorruptRow`` otherwise (a planted id sent a page's actions to another job)."""
        job = cls.from_row(queue, row)
        if job.id != job_id:
            raise CorruptRow(f"the row holds the id {job.id[:80]!r}, not its key's {job_id}")
        return job

    @classmethod
    def from_values(cls, queue: str, values: Sequence[str | None]) -> Job:
        """Read a row given as its ``ROW_FIELDS`` values in order (None: absent), as the
        claim script returns it: no field names on the wire, no dict per claimed job
        (each field is found by its name's index, ``AT``).

        Bytes that are not UTF-8 arrive escaped (``connector.READ_ERRORS``): such text
        is no job's valid payload, task path or number, so the row is refused by
        whoever reads that field (``CorruptRow`` here for a number).
        """
        job_id = _required(values, "id")
        state, payload = _required(values, "state"), _required(values, "payload")
        if state not in STATES:
            raise CorruptRow(f"unknown state {state[:40]!r}")
        # One unpacking in ROW_FIELDS order, a Job built in its fields' order (both pinned
        # by tests/engine/test_rows.py): a claim reads hundreds of rows, and looking each
        # field up by name cost as much as the rest.
        (_, _, _, task, run_after, worker, workers, errors, last_error, result, idem, solo,
         limits, priority, attempts, refunds, max_attempts, lease_ms, enqueued_at, started_at,
         last_attempted_at, finished_at, due_ms, lease_deadline, result_ttl_ms, timeout_ms,
         crashes, run) = _with_ints(values)  # fmt: skip
        return cls(
            queue, job_id, state, payload, task or "", priority or 0, attempts or 0,
            refunds or 0, max_attempts or DEFAULT_MAX_ATTEMPTS, lease_ms or 0, enqueued_at,
            started_at, last_attempted_at, finished_at, due_ms, lease_deadline, run_after or "",
            worker or "", tuple(workers.split("\n")) if workers else (), errors or "",
            last_error or "", result, result_ttl_ms, idem or "", timeout_ms or 0, crashes or 0,
            solo == "1", run is not None and run == attempts, limits or "",
        )  # fmt: skip


def _required(values: Sequence[str | None], name: str) -> str:
    value = values[AT[name]]
    if value is None:
        raise CorruptRow(f"the row has no {name!r} field")
    return value


def int_or_none(value: object) -> int | None:
    """A row field as an int; None when it is absent or not a number: for what shows
    rows (pages, lists), where a corrupt field must not hide the others."""
    if isinstance(value, int):
        return value
    try:
        return int(str(value)) if value not in (None, "") else None
    except ValueError:
        return None


def typed_fields(fields: Mapping[str, str | None]) -> dict[str, Any]:
    """Some of a row's fields as a listing shows them: the ``INT_FIELDS`` as ints (or
    None), as ``Job`` types them, the rest as they are."""
    return {k: int_or_none(v) if k in INT_FIELDS else v for k, v in fields.items()}


def _record(entry: dict[str, Any]) -> dict[str, Any]:
    """One entry of a row's errors with every field a reader shows, each of its type."""
    at_us = entry.get("at_us")
    return {
        "exception_class_path": _text(entry.get("exception_class_path")),
        "traceback": _text(entry.get("traceback")),
        "worker": _text(entry.get("worker")),
        "at_us": at_us if type(at_us) is int else None,
    }


def _text(value: object) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)


def _with_ints(values: Sequence[str | None]) -> list[Any]:
    """``values`` with the ``INT_FIELDS`` (the tail) as ints (None when absent or empty);
    ``CorruptRow`` names one that is not an integer."""
    head, tail = values[: len(TEXT_FIELDS)], values[len(TEXT_FIELDS) :]
    try:
        return [*head, *[int(v) if v else None for v in tail]]
    except ValueError:
        for name, v in zip(INT_FIELDS, tail, strict=True):
            try:
                int(v or 0)
            except ValueError:
                raise CorruptRow(f"field {name!r} is not an integer: {(v or '')[:40]!r}") from None
        raise
