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

from django.conf import settings
from django.core.management.base import CommandError

from echomq_django import conf, logs
from echomq_django.backends import EchoMQBackend
from echomq_django.compat import task_backends
from echomq_django.engine.connector import Connector
from echomq_django.engine.errors import AccessDenied, ServerUnavailable
from echomq_django.engine.jobs import Jobs
from echomq_django.engine.keyspace import validate_queue_name
from echomq_django.logs import printable
from echomq_django.server_checks import server_warnings

__all__ = ["LOG_FORMAT", "printable"]  # printable: the commands' (and the tests') name for it

LOG_FORMAT = logs.TEXT_FORMAT


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


def count_arg(most: int | None = None) -> Callable[[str], int]:
    """argparse type: an integer from 1 to ``most``, the engine's own bound for what it
    counts (``SWEEP_MAX`` for a batch, ``PAGE_MAX`` for a page), so a count the engine
    would refuse is refused at parse time naming the option, not later as an engine
    error naming its parameter (``limit``). None: no bound the engine sets."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
        if number < 1 or (most is not None and number > most):
            upper = f" and at most {most:,}" if most is not None else ""
            raise argparse.ArgumentTypeError(f"{value!r}: give an integer of at least 1{upper}")
        return number

    parse.__name__ = "count"  # argparse names the type in its messages
    return parse


def setup_logging(verbosity: int) -> None:
    """Log to stderr in ECHOMQ['LOG_FORMAT'] (echomq_django.logs), unless the project's
    LOGGING already has a handler.

    ``-v 0`` shows the ``echomq`` loggers' warnings only, ``-v 1`` (the default) one
    line per job, ``-v 2`` debug. The handler goes on the root logger, so that other
    loggers of the process (django-tasks logs a failed task's traceback) have the same
    format and are escaped too instead of reaching Python's last-resort handler raw.
    Django's own INFO lines per task (started, finished) are turned off there: the
    job event line says it, once; its ERROR line with a failed task's traceback stays.
    """
    try:
        formatter = logs.formatter((getattr(settings, "ECHOMQ", {}) or {}).get("LOG_FORMAT"))
    except logs.LogFormatError as exc:
        raise CommandError(str(exc)) from None
    echomq = logging.getLogger("echomq")
    echomq.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG))
    root = logging.getLogger()
    if not echomq.handlers and not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(formatter)
        root.addHandler(handler)
        for name in ("django.tasks", "django_tasks"):
            framework = logging.getLogger(name)
            if framework.level == logging.NOTSET:
                framework.setLevel(logging.WARNING)


def on_stop_signals(stop: Callable[[], None], logger: logging.Logger, waits: str = "") -> None:
    """SIGTERM, SIGINT, SIGHUP: the first calls ``stop`` (graceful), a second exits at once.

    ``waits`` says what a graceful stop waits for, and how long (the line an operator
    reads after Ctrl-C). Exiting at once leaves held jobs active; the reaper returns
    them after their lease. A signal the process was started with ignored stays
    ignored (SIGINT for a job a shell put in the background, SIGHUP under nohup), as
    Python's own handling does; SIGHUP (its terminal closed) would otherwise end the
    process with no stop and no line in its log.
    """

    stopping = False

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        name = signal.Signals(signum).name
        if stopping:
            logger.warning("%s again: exiting now; the reaper will return held jobs", name)
            os._exit(128 + signum)
        stopping = True
        logger.warning(
            "%s: stopping%s; send it again (Ctrl-C) to exit at once",
            name,
            f": {waits}" if waits else "",
        )
        stop()

    signal.signal(signal.SIGTERM, handle)
    for signum in (signal.SIGINT, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, handle)


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


def warn_unconfigured(queues: list[str], logger: logging.Logger) -> None:
    """Warn, one line per queue, about served queues no task can be enqueued to here.

    A queue no EchoMQ backend lists (and no backend takes any queue) nor
    ECHOMQ['QUEUES'] names is most often a typo (``runworker defualt``): the worker
    would wait on it for ever while the jobs pile up in ``default``.
    """
    backends = [b for b in task_backends.all() if isinstance(b, EchoMQBackend)]
    if any(not b.queues for b in backends):
        return  # a backend that takes any queue name: every queue may be fed
    known = configured_queues()
    for queue in queues:
        if queue not in known:
            logger.warning(
                "queue %r is not configured: no TASKS backend's QUEUES and no "
                "ECHOMQ['QUEUES'] names it, so no task of this project is enqueued to it "
                "(a typo? configured: %s)",
                queue,
                ", ".join(known) or "none",
            )
