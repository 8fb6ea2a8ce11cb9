"""One log line per job event, with the same fields every time.

Every outcome the worker reaches for a job (completed, retried, dead, crashed,
released, lost, ...) is one record on the ``echomq.job`` logger, made here, so a
person reads one line per event and a log pipeline gets the same named fields
on each (``extra``, which a JSON formatter puts in the object)::

    job_id  task  queue  attempt  max_attempts  duration_ms  outcome  worker
    error (the failure's summary, "" if none)  retry_in_ms (a retry's wait, or None)

The human line reads ``job <id> <task> <outcome>[: detail] (<ms> ms)``, then the
other fields as ``key=value``. A failed attempt's traceback is attached (as the record's
``exc_text``) only when nothing else prints it: when the attempt ends the task
FAILED, Django's own ``django.tasks`` logger records the traceback (it is sent
inside the ``except`` block, so error trackers see it), and the event line stays
one line.

The same events go to the queue's event stream (``emq:{q}:events``, a STREAM capped
at about ``EVENTS_KEPT`` entries, its entry ids the server's clock), which
``echomq tail`` follows across every worker. Writing them inside the transition
scripts would have added an XADD to every transition; instead a worker gathers its
events here (``EventLog``) and sends them in the round trip that already carries its
completions (``Jobs.complete_many(riders=...)``), or, when none is due, from its
heartbeat within about a second: a stream write costs the hot path no round trip. A
flush's events are one stream entry (a JSON array, one XADD): an XADD of named fields
per event cost the no-op burst a third of its rate (measured), this costs it a few %.
The operator's actions from the command line are recorded on their own.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from . import script
from .connector import Call, Connector, plain
from .error_record import ErrorRecord
from .json_text import read_json
from .keyspace import QueueKeys

logger = logging.getLogger("echomq.job")

EVENTS_PER_ENTRY = 100  # events per stream entry (one XADD, one JSON array) at most
# Entries kept per queue's stream, about (XADD MAXLEN ~): at least this many events,
# at most EVENTS_PER_ENTRY times more (~10 MB) when every flush carries a full entry.
EVENTS_KEPT = 1_000
EVENTS_AGE_S = 0.1  # an event waits at most about this long for a round trip to ride

# The fields every job event carries (the JSON log format's keys; see docs/operations.md).
FIELDS = (
    "job_id",
    "task",
    "queue",
    "attempt",
    "max_attempts",
    "duration_ms",
    "outcome",
    "worker",
    "error",
    "retry_in_ms",
)


def log_job(
    level: int,
    *,
    job_id: str,
    task: str,
    queue: str,
    attempt: int,
    max_attempts: int,
    duration_ms: float,
    outcome: str,
    worker: str,
    error: str = "",
    retry_in_ms: int | None = None,
    detail: str = "",
    traceback: str = "",
    events: EventLog | None = None,
) -> None:
    """Log one job event (nothing is built when the level is off), and add it to
    ``events`` for the queue's stream (whatever the level)."""
    duration_ms = round(duration_ms, 1)
    if events is not None:
        events.add(
            queue,
            (outcome, job_id, task, attempt, max_attempts, duration_ms, worker, error,
             "" if retry_in_ms is None else retry_in_ms, detail),
        )  # fmt: skip
    if not logger.isEnabledFor(level):
        return
    fields = {
        "job_id": job_id,
        "task": task,
        "queue": queue,
        "attempt": attempt,
        "max_attempts": max_attempts,
        "duration_ms": duration_ms,
        "outcome": outcome,
        "worker": worker,
        "error": error,
        "retry_in_ms": retry_in_ms,
    }
    line = f"job {job_id} {task or '?'} {outcome}"
    if detail:
        line += f": {detail}"
    line += f" ({duration_ms:.1f} ms) queue={queue} attempt={attempt}/{max_attempts}"
    if retry_in_ms is not None:
        line += f" retry_in={retry_in_ms / 1000:g}s"
    if error:
        line += f" error={error!r}"
    line += f" worker={worker}"
    record = logger.makeRecord(logger.name, level, "", 0, line, (), None, extra=fields)
    record.exc_text = traceback or None
    logger.handle(record)


# The stream entry's fields, in the order EventLog.add takes them: the log's names
# (``queue`` is the stream's own), and the detail the log line reads after the outcome.
STREAM_FIELDS = (
    "outcome", "job_id", "task", "attempt", "max_attempts", "duration_ms", "worker", "error",
    "retry_in_ms", "detail",
)  # fmt: skip


class EventLog:
    """Job events on their way to their queues' streams: added as they happen (any
    thread), taken as script calls by whoever makes the next round trip."""

    def __init__(self, kept: int = EVENTS_KEPT) -> None:
        self.kept = kept
        # (queue, values) in order. deque.append and popleft are atomic: adding (once per
        # job, on the hot path) takes no lock, and take() loses no event added meanwhile.
        self._waiting: deque[tuple[str, Sequence[object]]] = deque()
        self.since = 0.0  # monotonic time of the oldest event waiting (0: none)

    def add(self, queue: str, values: Sequence[object]) -> None:
        """One event: its values in STREAM_FIELDS order."""
        if not self.since:
            self.since = time.monotonic()
        self._waiting.append((queue, values))

    def due(self, now: float) -> bool:
        """An event has waited EVENTS_AGE_S for a round trip: send it on its own."""
        return bool(self.since) and now - self.since >= EVENTS_AGE_S

    def take(self) -> list[Call]:
        """The waiting events as script calls (one per queue and entry), emptied."""
        self.since = 0.0
        by_queue: dict[str, list[Sequence[object]]] = {}
        events_script = script.load("events")
        waiting = self._waiting
        for _ in range(len(waiting)):
            queue, values = waiting.popleft()
            by_queue.setdefault(queue, []).append(values)
        return [
            Call(
                events_script,
                events_script.keys_for(QueueKeys.of(queue)),
                [self.kept, _NAMES, json.dumps(batch[i : i + EVENTS_PER_ENTRY])],
            )
            for queue, batch in by_queue.items()
            for i in range(0, len(batch), EVENTS_PER_ENTRY)
        ]


_NAMES = ",".join(STREAM_FIELDS)


def record(connector: Connector, queue: str, **fields: object) -> None:
    """Add one event now, on its own round trip (an operator's action: seldom)."""
    events = EventLog()
    events.add(queue, [fields.get(name, "") for name in STREAM_FIELDS])
    connector.run_many(events.take())


@dataclass(frozen=True)
class JobEvent:
    """One event of a queue's stream, as ``echomq tail`` prints it."""

    queue: str
    entry_id: str  # "<server ms>-<n>": when the server stored its batch; the cursor after it
    index: int  # its place in the entry's batch
    fields: Mapping[str, str]  # each value as text ("" for none), whatever the entry held

    @property
    def at_ms(self) -> int:
        return int(self.entry_id.split("-", 1)[0])

    def as_dict(self) -> dict[str, Any]:
        """The log's JSON fields (numbers as numbers, no retry: None) and the event's id."""
        f = self.fields
        retry = f.get("retry_in_ms", "")
        return {
            "id": f"{self.entry_id}.{self.index}",
            "queue": self.queue,
            **{name: f.get(name, "") for name in STREAM_FIELDS},
            "attempt": _number(f.get("attempt"), int),
            "max_attempts": _number(f.get("max_attempts"), int),
            "duration_ms": _number(f.get("duration_ms"), float),
            "retry_in_ms": _number(retry, int) if retry not in ("", None) else None,
        }


def _entry_events(queue: str, entry_id: str, entry: Mapping[str, str]) -> list[JobEvent]:
    """The events of one stream entry, their values as text.

    An entry that is not ours (no such fields, not JSON, nested past the parser) gives
    [], and an event of it whose values are not all text, numbers or null (a list as
    the outcome) is left out: what the stream holds is shown, or nothing, never a crash.
    """
    try:
        names = entry["fields"].split(",")
        batch = read_json(entry["events"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return []
    if not isinstance(batch, list):
        return []
    found = []
    for n, values in enumerate(batch):
        if isinstance(values, list) and all(isinstance(v, _SCALARS) for v in values):
            text = {name: "" if v is None else str(v) for name, v in zip(names, values)}
            found.append(JobEvent(queue, entry_id, n, text))
    return found


_SCALARS = (str, int, float, type(None))  # what an event's value may be (JSON's scalars)


def _number(value: object, kind: type[int] | type[float]) -> int | float:
    if not isinstance(value, (int, float, str)):
        return 0
    try:
        number = kind(value or 0)
    except (TypeError, ValueError):  # an entry written by hand: shown, not a crash
        return 0
    return number if isinstance(number, int) or math.isfinite(number) else 0


def read(
    connector: Connector, cursors: dict[str, str], block_ms: int, count: int = 1000
) -> Iterator[JobEvent]:
    """The events after each queue's cursor (``cursors``: queue -> entry id, advanced).

    One blocking XREAD over every stream when they share a server; on a cluster
    they live in different slots, so each is read on its own, without blocking,
    and an empty round waits ``block_ms`` before the next.
    """
    client = connector.client
    streams = {QueueKeys.of(q).events: q for q in cursors}
    replies: list[Any] = []
    if connector.is_cluster:
        for key, queue in streams.items():
            one: dict[Any, Any] = {key: cursors[queue]}
            replies += plain(partial(client.xread, one, count=count)) or []
        if not replies:
            time.sleep(block_ms / 1000)
    else:
        every: dict[Any, Any] = {key: cursors[queue] for key, queue in streams.items()}
        replies = plain(partial(client.xread, every, count=count, block=block_ms)) or []
    for key, entries in replies:
        queue = streams[key if isinstance(key, str) else key.decode()]
        for entry_id, entry in entries:
            cursors[queue] = entry_id
            yield from _entry_events(queue, entry_id, entry)


def failure_traceback(error: str) -> str:
    """The traceback text of a failure's error object ("" when it has none)."""
    if isinstance(error, ErrorRecord):
        return error.traceback.rstrip("\n")
    try:
        record = json.loads(error)
    except (TypeError, ValueError):
        return ""
    text = record.get("traceback") if isinstance(record, dict) else None
    return text.rstrip("\n") if isinstance(text, str) else ""
