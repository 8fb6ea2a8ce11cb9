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
"""

from __future__ import annotations

import json
import logging

from .error_record import ErrorRecord

logger = logging.getLogger("echomq.job")

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
) -> None:
    """Log one job event (nothing is built when the level is off)."""
    if not logger.isEnabledFor(level):
        return
    fields = {
        "job_id": job_id,
        "task": task,
        "queue": queue,
        "attempt": attempt,
        "max_attempts": max_attempts,
        "duration_ms": round(duration_ms, 1),
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
