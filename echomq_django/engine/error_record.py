"""The error record a row keeps of a failed attempt, built once per failure.

Text from task code (exception messages, tracebacks) must always be storable: a
lone surrogate (common from ``os.fsdecode`` file names) cannot be sent as UTF-8,
and a 32 MiB message would make the row, and the script appending it, huge. So
every error record is built here: surrogates escaped, tracebacks cut to
``ERROR_TEXT_MAX`` characters (their head and their tail, where the raise is), the
summary one line. The row keeps the last errors up to ``ERRORS_MAX_BYTES``
(``append_error`` in the scripts' common include) and counts the rest.

An ``ErrorRecord`` is the JSON object the scripts splice into the row (a ``str``,
so it travels wherever a failure's error does) that also keeps its two parts: the
worker's checks, its log line and the Django layer's ``TaskError`` read them from
it instead of parsing the JSON they were just made into. Only an error string
from elsewhere (a handler's own ``Failure``, a child process's reply) is parsed.
"""

from __future__ import annotations

import json
import traceback as tb

ERROR_TEXT_MAX = 16 * 1024  # characters of one traceback kept (head and tail)
ERROR_HEAD = 4 * 1024
SUMMARY_MAX = 500


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


class ErrorRecord(str):
    """``{"exception_class_path": ..., "traceback": ...}``, storable, with its parts kept."""

    class_path: str
    traceback: str

    def __new__(cls, class_path: str, text: str) -> ErrorRecord:
        path, kept = storable(class_path, 500), storable(text)
        record = super().__new__(cls, json.dumps({"exception_class_path": path, "traceback": kept}))
        record.class_path, record.traceback = path, kept
        return record

    def __reduce__(self) -> tuple[type[ErrorRecord], tuple[str, str]]:
        """copy, deepcopy and dataclasses.asdict rebuild it from its parts."""
        return (ErrorRecord, (self.class_path, self.traceback))

    @classmethod
    def of(cls, exc: BaseException) -> ErrorRecord:
        """The record of ``exc``: its class path and its traceback, formatted once."""
        kind = type(exc)
        return cls(f"{kind.__module__}.{kind.__qualname__}", "".join(tb.format_exception(exc)))


def error_json(class_path: str, text: str) -> ErrorRecord:
    """One error object as the row's ``errors`` array keeps it (always storable)."""
    return ErrorRecord(class_path, text)


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or what ``traceback`` prints when a task's exception class cannot
    say it: an exception whose ``__str__`` raises still fails its job normally."""
    try:
        return str(exc)
    except Exception:
        return "<exception str() failed>"


def summary_line(text: str) -> str:
    lines = text.splitlines()
    return storable(lines[0] if lines else "", SUMMARY_MAX)[:SUMMARY_MAX]
