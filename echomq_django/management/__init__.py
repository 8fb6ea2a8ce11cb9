"""Process plumbing shared by the long-running commands (``runworker``, ``runreaper``).

The engine objects do the work; these helpers only adapt a Django process to
them: logging, signals, the start-up banner, and argument types.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable
from types import FrameType

from django.core.management.base import CommandError

from echomq_django import conf
from echomq_django.backends import EchoMQBackend
from echomq_django.checks import server_warnings
from echomq_django.compat import task_backends
from echomq_django.engine.connector import Connector
from echomq_django.engine.errors import AccessDenied, ServerUnavailable
from echomq_django.engine.jobs import Jobs
from echomq_django.engine.keyspace import validate_queue_name

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s[%(process)d] %(message)s"


def queue_arg(value: str) -> str:
    """argparse type: a valid queue name (checked before any key is built)."""
    try:
        return validate_queue_name(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds_arg(value: str) -> float:
    """argparse type: a duration in seconds, greater than zero."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 < seconds < 7 * 24 * 3600:
        raise argparse.ArgumentTypeError(f"{value!r}: give seconds between 0 and one week")
    return seconds


def count_arg(value: str) -> int:
    """argparse type: a positive integer."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: give an integer of at least 1")
    return number


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


class PrintableFormatter(logging.Formatter):
    """Log lines (tracebacks too) with control characters escaped, as ``printable``."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def setup_logging(verbosity: int) -> None:
    """Log to stderr, control characters escaped, unless the project's LOGGING already does.

    ``-v 0`` shows the ``echomq`` loggers' warnings only, ``-v 1`` (the default) one
    line per job, ``-v 2`` debug. The handler goes on the root logger, so that other
    loggers of the process (django-tasks logs a failed task's traceback) are escaped
    too instead of reaching Python's last-resort handler raw.
    """
    echomq = logging.getLogger("echomq")
    echomq.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG))
    root = logging.getLogger()
    if not echomq.handlers and not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(PrintableFormatter(LOG_FORMAT))
        root.addHandler(handler)


def on_stop_signals(stop: Callable[[], None], logger: logging.Logger) -> None:
    """SIGTERM/SIGINT: the first calls ``stop`` (graceful), a second exits at once.

    Exiting at once leaves held jobs active; the reaper returns them after their lease.
    """

    stopping = False

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        name = signal.Signals(signum).name
        if stopping:
            logger.warning("%s again: exiting now; the reaper will return held jobs", name)
            os._exit(128 + signum)
        stopping = True
        logger.warning("%s: stopping gracefully (send it again to exit at once)", name)
        stop()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)


def server_version(connector: Connector) -> str:
    """``valkey 8.1.1`` / ``redis 7.0.15``, or why it is unknown (never raises)."""
    try:
        info = connector.client.info("server")
    except Exception as exc:
        return f"unknown ({type(exc).__name__}: {exc})"
    if info and all(isinstance(v, dict) for v in info.values()):
        info = next(iter(info.values()))  # a cluster client answers per node
    if "valkey_version" in info:
        return f"valkey {info['valkey_version']}"
    return f"redis {info.get('redis_version', '?')}"


def connect() -> Jobs:
    """The process's engine API, or a CommandError where starting makes no sense.

    A server that refuses us (a wrong password, a missing ACL right, a rejected
    certificate) is a configuration error: stop with it rather than retry for ever.
    A server that is merely down is ridden out by the worker and the reaper, but a
    cluster must answer once at start: its client needs the slot map to exist.
    """
    jobs = None
    try:
        jobs = conf.get_jobs()
        jobs.connector.ping()
    except AccessDenied as exc:
        raise CommandError(f"the server refused access: {exc}") from exc
    except ServerUnavailable as exc:
        if jobs is None:
            raise CommandError(f"the cluster is unreachable: {exc}") from exc
    return jobs


def log_server_warnings(connector: Connector, logger: logging.Logger) -> None:
    """Warn about a server that can lose jobs (no persistence, an evicting memory policy)."""
    for warning in server_warnings(connector):
        logger.warning("%s", warning)


def configured_queues() -> list[str]:
    """ECHOMQ['QUEUES'] and the QUEUES of every EchoMQ TASKS backend (valid names only)."""
    names = list(conf.get_settings().queues)
    for backend in task_backends.all():
        if isinstance(backend, EchoMQBackend):  # subclasses too
            names += sorted(backend.queues)
    valid = []
    for name in dict.fromkeys(names):
        try:
            valid.append(validate_queue_name(name))
        except ValueError:
            logging.getLogger("echomq").warning(
                "skipping invalid queue name %r from the settings", name
            )
    return valid
