"""What running a job produced: a result or a failure (its error record: error_record.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from .error_record import ERROR_TEXT_MAX, ErrorRecord, error_json, exception_text, summary_line
from .jobs import Claimed
from .json_text import read_json

# error_json, summary_line and ERROR_TEXT_MAX are the record's (error_record.py), named
# here too because a failure is made of them.
__all__ = [
    "ERROR_TEXT_MAX", "EndedOutside", "Failure", "Handler", "Outcome", "Success", "call_handler",
    "error_json", "error_object", "failure_from_exception", "summary_line", "tell_ended",
]  # fmt: skip


# Told (queue, job id) of a job that ended for good without its handler's say: its
# process was killed or crashed, or the reaper moved it to dead after its worker died.
# The handler had no chance to report it (Django's task_finished).
EndedOutside = Callable[[str, str], None]


def tell_ended(hook: EndedOutside | None, queue: str, job_id: str, logger: logging.Logger) -> None:
    """Tell ``hook`` that a job ended outside its handler; a failing hook is logged (on
    the caller's ``logger``) and never stops the worker or the reaper ending jobs."""
    if hook is None:
        return
    try:
        hook(queue, job_id)
    except Exception:
        logger.exception("telling that job %s ended failed", job_id)


@dataclass(frozen=True, slots=True)
class Success:
    result: str = "null"  # opaque string stored as the row's result (the Django layer's JSON)


@dataclass(frozen=True, slots=True)
class Failure:
    error: str  # ONE JSON object {"exception_class_path": ..., "traceback": ...}
    summary: str  # one line, e.g. "ValueError: boom"
    retry: bool = True  # False: dead-letter now (unknown task, corrupt payload, non-retryable)
    backoff_ms: int | None = None  # None: the worker's RetryPolicy


Outcome = Success | Failure
Handler = Callable[[Claimed], Outcome]


def failure_from_exception(exc: BaseException, record: ErrorRecord | None = None) -> Failure:
    """A retryable Failure carrying the exception's class path and its traceback
    (``record``: the exception's record, when the caller built it already)."""
    cls, text = type(exc), exception_text(exc)
    summary = summary_line(f"{cls.__name__}: {text}" if text else cls.__name__)
    return Failure(record or ErrorRecord.of(exc), summary)


def error_object(error: str, summary: str) -> str:
    """``error`` as one storable JSON object of bounded size (rewrapped if it is not)."""
    if isinstance(error, ErrorRecord):  # built here: storable and bounded already
        return error
    try:
        record = read_json(error)
    except (TypeError, ValueError):
        record = None
    if isinstance(record, dict) and len(error) <= 2 * ERROR_TEXT_MAX:
        try:
            error.encode("utf-8")
            return error
        except UnicodeEncodeError:
            pass
    if isinstance(record, dict):
        path = str(record.get("exception_class_path", "builtins.Exception"))
        return error_json(path, str(record.get("traceback", "")))
    return error_json("builtins.Exception", f"{summary}\n{error}")


def call_handler(handler: Handler, claimed: Claimed) -> Outcome:
    """The handler's outcome; a handler bug becomes a Failure, never a dead worker."""
    if claimed.job is None:
        why = f"CorruptRow: {claimed.corrupt}"
        return Failure(error_json("echomq_django.engine.errors.CorruptRow", why), why, False)
    try:
        outcome = handler(claimed)
    except BaseException as exc:
        return failure_from_exception(exc)
    if isinstance(outcome, Success) and isinstance(outcome.result, str):
        return outcome
    if isinstance(outcome, Failure):
        return outcome
    return failure_from_exception(
        TypeError(f"the handler returned {outcome!r:.200}, not Success(str) or Failure")
    )
