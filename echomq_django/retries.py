"""Retries as Django's retries proposal has them (django/new-features#142): opt-in.

A task that raises is FAILED at once, as on Django's own backends. A task (or its
backend, ``OPTIONS["MAX_ATTEMPTS"]``/``["BACKOFF"]``) opts in::

    @task(max_attempts=5, backoff=30)                 # seconds, or a timedelta
    @task(max_attempts=5, backoff=linear_backoff)     # (exception, task_result) -> seconds | None
    @task(max_attempts=5, retry_on=(ConnectionError,), no_retry_on=(PermissionError,))

and task code may ask for a retry itself: ``raise Retry(delay=60)``. Every retry
stays within ``max_attempts`` (the row's, fixed at enqueue). A callable backoff
sees the result as it stands after the failed attempt (status FAILED, this
attempt's error last in ``errors``); returning None ends the task FAILED. With
no backoff set anywhere, the worker's exponential backoff with jitter applies.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .compat import AnyTaskResult
from .engine.errors import InvalidJobOptions
from .engine.jobs import MAX_DELAY_MS

logger = logging.getLogger("echomq.execution")

Delay = int | float | timedelta
BackoffFunction = Callable[[BaseException, AnyTaskResult], Delay | None]
Backoff = Delay | BackoffFunction
ExceptionTypes = tuple[type[BaseException], ...]


class Retry(Exception):
    """Raised by task code to be run again after ``delay`` (seconds or a timedelta).

    ``delay`` None: the task's backoff. Still bounded by the task's ``max_attempts``;
    past it the task is FAILED with this exception as its last error.
    """

    def __init__(self, delay: Delay | None = None, reason: str = "") -> None:
        super().__init__(reason or "retry requested")
        self.delay_ms = None if delay is None else delay_ms(delay, "Retry(delay=...)")


def delay_ms(value: Delay, name: str) -> int:
    """Seconds (or a timedelta) as whole ms, at most the engine's longest delay."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value < math.inf  # also refuses NaN
        or value * 1000 > MAX_DELAY_MS
    ):
        raise InvalidJobOptions(
            f"{name} must be a number of seconds (or a timedelta) from 0 to "
            f"{MAX_DELAY_MS // 1000}, not {value!r}"
        )
    return round(value * 1000)


def exception_types(value: Any, name: str) -> ExceptionTypes:
    """An exception class or a sequence of them, as a tuple (hashable, for ``isinstance``)."""
    items = (value,) if isinstance(value, type) else value
    try:
        items = tuple(items)
    except TypeError:
        items = (value,)
    if not all(isinstance(i, type) and issubclass(i, BaseException) for i in items):
        raise InvalidJobOptions(f"{name} must be exception classes, not {value!r}")
    return items


def parse_backoff(value: Backoff | None) -> int | BackoffFunction | None:
    """A backoff option: ms, a callable kept as is, or None (not set)."""
    if value is None or callable(value):
        return value
    return delay_ms(value, "backoff")


@dataclass(frozen=True, slots=True)
class Decision:
    retry: bool
    backoff_ms: int | None = None  # None: the worker's policy


NO_RETRY = Decision(False)


def decide(
    exc: BaseException,
    result: AnyTaskResult,
    *,
    used: int,
    max_attempts: int,
    backoff: int | BackoffFunction | None,
    retry_on: ExceptionTypes = (),
    no_retry_on: ExceptionTypes = (),
) -> Decision:
    """Whether the attempt that raised ``exc`` is retried, and after how long.

    ``used`` is the attempts the engine has counted (its retry script sends the
    job dead at ``max_attempts`` whatever is said here, so the two agree).
    """
    if used >= max_attempts:
        return NO_RETRY
    if isinstance(exc, Retry):
        if exc.delay_ms is not None:
            return Decision(True, exc.delay_ms)
    elif (retry_on and not isinstance(exc, retry_on)) or isinstance(exc, no_retry_on):
        return NO_RETRY
    if not callable(backoff):
        return Decision(True, backoff)
    try:
        seconds = backoff(exc, result)
        return NO_RETRY if seconds is None else Decision(True, delay_ms(seconds, "backoff()"))
    except Exception:
        logger.exception("the backoff of task %s failed: not retried", result.task.module_path)
        return NO_RETRY
