"""EchoMQ's task options: the Task subclass that carries them, and their parsing.

Per task (``@task(max_attempts=5, backoff=30, timeout=60, lease=120)``, durations
in seconds or as timedelta) or backend-wide (``OPTIONS["MAX_ATTEMPTS"]`` ...),
the task's value winning. Retries are opt-in: ``MAX_ATTEMPTS`` is 1 unless set
(see :mod:`echomq_django.retries`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.utils import timezone

from .compat import (
    DEFAULT_TASK_BACKEND_ALIAS,
    DEFAULT_TASK_PRIORITY,
    DEFAULT_TASK_QUEUE_NAME,
    AnyTask,
    InvalidTask,
    Task,
)
from .engine.errors import InvalidJobOptions
from .engine.jobs import NewJob
from .retries import (
    Backoff,
    BackoffFunction,
    ExceptionTypes,
    delay_ms,
    exception_types,
    parse_backoff,
)

Duration = int | float | timedelta
DEFAULT_MAX_ATTEMPTS = 1  # Django's meaning: an exception fails the task; retries are opt-in
# Options that set the job's row (per task, and backend-wide in upper case).
JOB_OPTIONS = ("max_attempts", "backoff", "timeout", "lease", "result_ttl", "dead_ttl")


@dataclass(frozen=True, slots=True, kw_only=True)
class EchoMQTask(AnyTask):
    """A Task with EchoMQ's per-task options (None: the backend's, then the default)."""

    # Django's fields, with the defaults Django 6.1 and the backport give them (6.0 gives none).
    priority: int = DEFAULT_TASK_PRIORITY
    backend: str = DEFAULT_TASK_BACKEND_ALIAS
    queue_name: str = DEFAULT_TASK_QUEUE_NAME
    run_after: datetime | None = None
    max_attempts: int | None = None
    backoff: Backoff | None = None
    retry_on: ExceptionTypes = ()  # empty: every exception may be retried
    no_retry_on: ExceptionTypes = ()
    timeout: Duration | None = None
    lease: Duration | None = None
    result_ttl: Duration | None = None
    dead_ttl: Duration | None = None
    enqueue_on_commit: bool | str | None = None  # True, False or "outbox"
    idempotency_key: str | None = None
    # Flow control (echomq_django.flow): enforced by the claim across all workers.
    rate_limit: str | None = None  # "10/s", "600/m", "100/15m", "20/s burst 5"
    concurrency: int | None = None  # at most N running at once (per key with concurrency_key)
    concurrency_key: Callable[..., str | int] | None = None  # of the task's arguments
    unique_for: Duration | None = None  # throttle: one job per idempotency key per window
    debounce: Duration | None = None  # the key's waiting job takes the new arguments, runs after

    def __post_init__(self) -> None:
        for name in ("retry_on", "no_retry_on"):  # a class or a list: a tuple (hashable)
            try:
                object.__setattr__(self, name, exception_types(getattr(self, name), name))
            except ValueError as exc:
                raise InvalidTask(str(exc)) from exc
        Task.__post_init__(self)  # explicit base: zero-arg super() fails with slots

    def using(
        self,
        *,
        run_after: datetime | timedelta | None = None,
        idempotency_key: str | None = None,
        **changes: Any,
    ) -> EchoMQTask:
        """Django's ``using()``; ``run_after`` may be a timedelta (from now); plus an
        idempotency key for this one enqueue."""
        if isinstance(run_after, timedelta):
            run_after = timezone.now() + run_after
        task = Task.using(self, run_after=run_after, **changes)
        assert isinstance(task, EchoMQTask)  # using() is a dataclass replace(): the class stays
        if idempotency_key is not None:
            task = replace(task, idempotency_key=idempotency_key)
        return task


def duration_ms(value: Duration | None, name: str) -> int | None:
    """Seconds (or a timedelta) as whole milliseconds; None stays None."""
    return None if value is None else delay_ms(value, name)


def positive_ms(value: Duration | None, name: str) -> int | None:
    ms = duration_ms(value, name)
    if ms == 0:
        raise InvalidJobOptions(f"{name} must be positive")
    return ms


class RowFields(TypedDict, total=False):
    """The NewJob keyword arguments that job options set (a missing one keeps the engine's)."""

    max_attempts: int
    timeout_ms: int
    lease_ms: int
    result_ttl_ms: int
    dead_ttl_ms: int


@dataclass(frozen=True, slots=True)
class JobOptions:
    """The job options in engine units; None means "not set here"."""

    max_attempts: int | None = None
    backoff: int | BackoffFunction | None = None  # ms, or a callable
    timeout_ms: int | None = None
    lease_ms: int | None = None
    result_ttl_ms: int | None = None
    dead_ttl_ms: int | None = None

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> JobOptions:
        """From lowercase option names (task fields, or backend OPTIONS lowered)."""
        return cls(
            max_attempts=values.get("max_attempts"),
            backoff=parse_backoff(values.get("backoff")),
            timeout_ms=positive_ms(values.get("timeout"), "timeout"),
            lease_ms=positive_ms(values.get("lease"), "lease"),
            result_ttl_ms=duration_ms(values.get("result_ttl"), "result_ttl"),
            dead_ttl_ms=duration_ms(values.get("dead_ttl"), "dead_ttl"),
        ).checked()

    def over(self, defaults: JobOptions) -> JobOptions:
        """These options, falling back to ``defaults`` for the ones not set."""
        mine = {f.name: getattr(self, f.name) for f in fields(self)}
        return JobOptions(
            **{name: getattr(defaults, name) if v is None else v for name, v in mine.items()}
        )

    def new_job_fields(self) -> RowFields:
        """The NewJob keyword arguments these options set (unset ones keep the engine's)."""
        row: RowFields = {}
        if self.max_attempts is not None:
            row["max_attempts"] = self.max_attempts
        if self.timeout_ms is not None:
            row["timeout_ms"] = self.timeout_ms
        if self.lease_ms is not None:
            row["lease_ms"] = self.lease_ms
        if self.result_ttl_ms is not None:
            row["result_ttl_ms"] = self.result_ttl_ms
        if self.dead_ttl_ms is not None:
            row["dead_ttl_ms"] = self.dead_ttl_ms
        return row

    def checked(self) -> JobOptions:
        """Raise the engine's typed error for a value out of range (nothing is sent)."""
        NewJob(payload="", **self.new_job_fields()).validate()
        return self
