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

A record's text is data as much as the row it came from: an exception message
a task chose, a row's field anyone with write access can fill. Neither format
lets it pass for another record: a text record is one line, and every line below
it (the message's own, the traceback's) starts with ``CONTINUATION``, so only a
record's first line can begin with a timestamp; a JSON record is one object on
one line. Both cut each text at ``ERROR_TEXT_MAX`` characters (head and tail, as a
row's stored traceback) and escape lone surrogates, which strict JSON parsers
(``jq``) refuse.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter as BaseJsonFormatter

from .engine.error_record import storable

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s[%(process)d] %(message)s"
JSON_FIELDS = ("asctime", "levelname", "name", "process", "message")
JSON_NAMES = {"asctime": "time", "levelname": "level", "name": "logger"}
FORMATS = ("text", "json")
CONTINUATION = "| "  # starts every line of a text record after its first


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
    """One line per record, the lines below it marked, control characters escaped."""

    def __init__(self, fmt: str = TEXT_FORMAT, **kwargs: object) -> None:
        super().__init__(fmt, **kwargs)  # type: ignore[arg-type]

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return super().formatTime(record, datefmt) if datefmt else iso_time(record)

    def format(self, record: logging.LogRecord) -> str:
        record.message = storable(record.getMessage())
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        text = self.formatMessage(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            text += "\n" + storable(record.exc_text)
        if record.stack_info:
            text += "\n" + storable(self.formatStack(record.stack_info))
        head, *below = text.split("\n")
        return "\n".join(
            [printable(head, keep=""), *(CONTINUATION + printable(line, keep="") for line in below)]
        )


class JsonFormatter(BaseJsonFormatter):
    """One JSON object per record (python-json-logger); the record's extra fields as keys."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("rename_fields", JSON_NAMES)
        super().__init__(*(args or (list(JSON_FIELDS),)), **kwargs)  # type: ignore[arg-type]

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return super().formatTime(record, datefmt) if datefmt else iso_time(record)

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        return {key: _bounded(value) for key, value in log_data.items()}


def _bounded(value: object) -> object:
    """A JSON record's value with every string in it storable (cut, surrogates escaped)."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {key: _bounded(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_bounded(item) for item in value]
    return value


def formatter(name: object) -> logging.Formatter:
    """The formatter LOG_FORMAT names; ``LogFormatError`` for anything else."""
    if name in (None, "text"):
        return TextFormatter()
    if name == "json":
        return JsonFormatter()
    raise LogFormatError(f"ECHOMQ['LOG_FORMAT'] must be 'text' or 'json', not {str(name)[:40]!r}")
