"""What the admin's pages show of a row: times, JSON, payloads, list entries, workers.

A job's page reads the whole row and cuts each text only as it shows it (``cut``):
a valid 20 KB payload cut first was no longer JSON.

A row is data anyone with write access to the server can change, so each helper
here turns what it cannot show (a time no datetime holds, JSON nested past what
the parser takes, a member no job id can be) into something a page can say,
never into an exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..engine.errors import InvalidJobId
from ..engine.jobs import Job
from ..engine.json_text import read_json
from ..engine.keyspace import validate_job_id
from ..engine.registry import WorkerInfo
from ..engine.rows import counted_attempts_of, int_or_none
from ..engine.stored import cut
from ..engine.times import MS, US, from_ms, from_server, from_us
from ..exceptions import PayloadError
from ..payload import Payload
from .chart import Sparkline


def bad_time(value: object, per_second: int) -> str:
    """Why a stored time cannot be shown ("" when it can, or when there is none)."""
    if value in (None, "") or from_server(value, per_second) is not None:
        return ""
    return f"not a time: {str(value)[:40]}"


def plural(count: int, what: str) -> str:
    """``1 job``, ``2 jobs``: a count as a message says it."""
    return f"{count} {what}" if count == 1 else f"{count} {what}s"


LISTED_MAX = 500  # characters of a text field one row of a list shows (its page shows more)


def clipped(text: str | None, most: int = LISTED_MAX) -> str:
    """``text`` cut for one row of a list: the worker writes short fields, but a planted
    or corrupt 10 MB one must not make the page tens of megabytes."""
    text = text or ""
    return text if len(text) <= most else text[: most - 1] + "…"


def pretty(value: Any) -> str:
    """JSON for people: one line when it is short, else indented."""
    line = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(line) <= 48:
        return line
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def pretty_json(raw: str | None) -> tuple[str, bool]:
    """(text, parsed): ``pretty`` JSON when ``raw`` parses, else ``raw``; cut as shown."""
    if raw is None:
        return "", False
    try:
        return cut(pretty(read_json(raw))), True
    except ValueError:  # not JSON, or nested past what the parser takes
        return cut(raw), False


def error_list(job: Job) -> list[dict[str, Any]]:
    """The row's error records (``Job.error_records``: every field there whatever was
    planted), each with ``at`` (when it was recorded, None for records older than that
    stamp)."""
    return [
        {**e, "traceback": cut(e["traceback"]), "at": from_us(e["at_us"])}
        for e in job.error_records
    ]


@dataclass(frozen=True, slots=True)
class ShownPayload:
    """The backend's payload as the detail page shows it; a corrupt one still renders."""

    task: str
    args: str  # pretty JSON
    kwargs: str
    options: str  # the other keys (backend, takes_context...), pretty JSON
    raw: str  # the payload as stored (pretty when it is JSON), when it cannot be read
    problem: str  # why the backend could not read it ("" if it can)

    @classmethod
    def of(cls, raw: str) -> ShownPayload:
        try:
            payload = Payload.loads(raw)
        except PayloadError as exc:
            return cls("", "", "", "", pretty_json(raw)[0], str(exc))
        options = {
            "backend": payload.backend,
            "takes_context": payload.takes_context,
            "idempotency_key": payload.idempotency_key,
        }
        return cls(
            task=cut(payload.task),
            args=cut(pretty(payload.args)),
            kwargs=cut(pretty(payload.kwargs)),
            options=cut(pretty(options)),
            raw="",
            problem="",
        )


@dataclass(frozen=True, slots=True)
class ListedJob:
    """One entry of a place's sorted set with the row fields a list shows."""

    id: str
    task: str
    priority: int | None
    attempts: int | None  # counted against max_attempts: the token minus the refunds
    max_attempts: int | None
    enqueued: datetime | None
    started: datetime | None
    finished: datetime | None
    due: datetime | None
    lease_deadline: datetime | None
    worker: str
    last_error: str
    missing: bool  # the set names a job whose row is gone (trimmed or deleted meanwhile)
    linked: bool  # False for a member no job id can be (planted): it has no page
    problems: tuple[str, ...]  # what of the row cannot be shown (a time out of range...)

    @classmethod
    def from_fields(cls, job_id: str, fields: dict[str, str | None]) -> ListedJob:
        problems = [
            f"{name} {why}"
            for name, scale in TIME_FIELDS.items()
            if (why := bad_time(fields.get(name), scale))
        ]
        try:
            validate_job_id(job_id)
            linked = True
        except InvalidJobId:
            linked = False
            problems.insert(0, f"“{job_id[:80]}” is not a job id")
        return cls(
            id=job_id,
            task=clipped(fields.get("task")),
            priority=int_or_none(fields.get("priority")),
            attempts=counted_attempts_of(fields),
            max_attempts=int_or_none(fields.get("max_attempts")),
            enqueued=from_us(fields.get("enqueued_at")),
            started=from_us(fields.get("started_at")),
            finished=from_us(fields.get("finished_at")),
            due=from_ms(fields.get("due_ms")),
            lease_deadline=from_ms(fields.get("lease_deadline")),
            worker=clipped(fields.get("worker")),
            last_error=clipped(fields.get("last_error")),
            missing=all(v is None for v in fields.values()),
            linked=linked,
            problems=tuple(problems),
        )


# The row's time fields and their units per second (µs for *_at, ms for the others).
TIME_FIELDS = {
    "enqueued_at": US, "started_at": US, "last_attempted_at": US, "finished_at": US,
    "due_ms": MS, "lease_deadline": MS,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class StateCount:
    state: str
    count: int
    url: str  # the list of this place


@dataclass(frozen=True, slots=True)
class QueueSummary:
    """A dashboard row: one queue's places, and its last hour of throughput."""

    name: str
    counts: list[StateCount]
    spark: Sparkline
    completed: int
    failed: int
    problem: str = ""  # why its places cannot be read (a key of another type), if so


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """A live worker from the registry, with its times as datetimes for the page."""

    id: str
    host: str
    pid: int
    queues: list[str]  # as runworker takes them: a sized one as name:slots
    concurrency: int
    processes: int  # the child processes its jobs run in (0: threads)
    running: list[str]
    started: datetime
    last_seen: datetime

    @classmethod
    def of(cls, info: WorkerInfo) -> WorkerRow:
        return cls(
            id=info.id,
            host=info.host,
            pid=info.pid,
            queues=info.queue_labels(),
            concurrency=info.concurrency,
            processes=info.processes,
            running=list(info.running),
            started=datetime.fromtimestamp(info.started_at, tz=UTC),  # the registry checked
            last_seen=datetime.fromtimestamp(info.last_seen, tz=UTC),  # both are in range
        )
