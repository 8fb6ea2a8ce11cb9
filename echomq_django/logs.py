"""Log formats of EchoMQ's processes: a line a person reads, or JSON a pipeline reads.

``settings.ECHOMQ["LOG_FORMAT"]`` is ``"text"`` (the default) or ``"json"``. It
applies where EchoMQ sets logging up (``runworker``, ``runreaper``: a handler on
the root logger, unless the project's LOGGING has one); a project with its own
LOGGING names a formatter class here instead::

    "formatters": {"echomq": {"()": "echomq_django.logs.JsonFormatter"}},

Both use one timestamp format, ISO 8601 in local time with milliseconds and the
UTC offset (``2026-12-01T10:40:56.123+00:00``), for EchoMQ's lines and Django's
alike. Job events (:mod:`echomq_django.engine.events`) carry their fields as
JSON keys; every line has ``time``, ``level``, ``logger``, ``process`` and
``message``, and ``exc_info`` when a traceback goes with it.
"""

from __future__ import annotations

import logging
from datetime import datetime

from pythonjsonlogger.json import JsonFormatter as BaseJsonFormatter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s[%(process)d] %(message)s"
JSON_FIELDS = ("asctime", "levelname", "name", "process", "message")
JSON_NAMES = {"asctime": "time", "levelname": "level", "name": "logger"}
FORMATS = ("text", "json")


class LogFormatError(ValueError):
    """ECHOMQ['LOG_FORMAT'] is neither "text" nor "json"."""


def iso_time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="milliseconds")


def printable(text: object, keep: str = "\n") -> str:
    """``text`` with each control or format character shown as its escape (``\\x1b``).

    Row fields, exception messages and registry entries are data anyone with write
    access (or any task) can fill: printed raw, an ESC sequence clears the
    operator's screen or forges a hyperlink, a CR or a bidi override rewrites what
    a line seems to say. Only the characters in ``keep`` pass as they are.
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(
        ch if ch.isprintable() or ch in keep else ch.encode("unicode_escape").decode()
        for ch in text
    )


class TextFormatter(logging.Formatter):
    """One line per record (tracebacks below it), control characters escaped."""

    def __init__(self, fmt: str = TEXT_FORMAT, **kwargs: object) -> None:
        super().__init__(fmt, **kwargs)  # type: ignore[arg-type]

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return super().formatTime(record, datefmt) if datefmt else iso_time(record)

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


class JsonFormatter(BaseJsonFormatter):
    """One JSON object per record (python-json-logger); the record's extra fields as keys."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("rename_fields", JSON_NAMES)
        super().__init__(*(args or (list(JSON_FIELDS),)), **kwargs)  # type: ignore[arg-type]

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return super().formatTime(record, datefmt) if datefmt else iso_time(record)


def formatter(name: object) -> logging.Formatter:
    """The formatter LOG_FORMAT names; ``LogFormatError`` for anything else."""
    if name in (None, "text"):
        return TextFormatter()
    if name == "json":
        return JsonFormatter()
    raise LogFormatError(f"ECHOMQ['LOG_FORMAT'] must be 'text' or 'json', not {str(name)[:40]!r}")
