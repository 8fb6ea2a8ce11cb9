"""What running a job produced: a result or a failure, and the error record a row keeps.

Text from task code (exception messages, tracebacks) must always be storable: a
lone surrogate (common from ``os.fsdecode`` file names) cannot be sent as UTF-8,
and a 32 MiB message would make the row, and the script appending it, huge. So
every error record is built here, once: surrogates escaped, tracebacks cut to
``ERROR_TEXT_MAX`` characters (their head and their tail, where the raise is), the
summary one line. The row keeps the last errors up to ``ERRORS_MAX_BYTES``
(``append_error`` in the scripts' common include) and counts the rest.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from .jobs import Claimed

ERROR_TEXT_MAX = 16 * 1024  # characters of one traceback kept (head and tail)
ERROR_HEAD = 4 * 1024
SUMMARY_MAX = 500


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


def storable(text: str, limit: int = ERROR_TEXT_MAX) -> str:
    """``text`` as valid UTF-8 (lone surrogates escaped) and at most about ``limit`` long."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > limit:
        head, tail = (
            text[: min(ERROR_HEAD, limit // 4)],
            text[-(limit - min(ERROR_HEAD, limit // 4)) :],
        )
        text = f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"
    return text


def error_json(class_path: str, text: str) -> str:
    """One error object as the row's ``errors`` array keeps it (always storable)."""
    return json.dumps(
        {"exception_class_path": storable(class_path, 500), "traceback": storable(text)}
    )


def summary_line(text: str) -> str:
    lines = text.splitlines()
    return storable(lines[0] if lines else "", SUMMARY_MAX)[:SUMMARY_MAX]


def failure_from_exception(exc: BaseException) -> Failure:
    """A retryable Failure carrying the exception's class path and its traceback."""
    cls = type(exc)
    text = "".join(traceback.format_exception(exc))
    summary = summary_line(f"{cls.__name__}: {exc}" if str(exc) else cls.__name__)
    return Failure(error_json(f"{cls.__module__}.{cls.__qualname__}", text), summary)


def error_object(error: str, summary: str) -> str:
    """``error`` as one storable JSON object of bounded size (rewrapped if it is not)."""
    try:
        record = json.loads(error)
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
