"""A job's row as Django's Tasks framework shows it: the Task it was enqueued as, and
its TaskResult, field by field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from .compat import AnyTask, AnyTaskResult, InvalidTask, TaskError, TaskResult, TaskResultStatus
from .discovery import resolve_task
from .engine.jobs import Job
from .engine.json_text import read_json
from .engine.times import from_us
from .exceptions import PayloadError
from .payload import Payload

STATUS_OF_STATE = {
    "pending": TaskResultStatus.READY,
    "scheduled": TaskResultStatus.READY,
    "active": TaskResultStatus.RUNNING,
    "completed": TaskResultStatus.SUCCESSFUL,
    "dead": TaskResultStatus.FAILED,
}


def from_server_us(us: int | None, use_tz: bool | None = None) -> datetime | None:
    """A row timestamp (server µs) as Django shows times: aware UTC, or naive in TIME_ZONE
    when USE_TZ=False (as Django's ``timezone.now()``, whatever zone is activated).

    ``use_tz``: settings.USE_TZ when the caller has it at hand (reading a setting
    costs more than the conversion itself).
    """
    moment = from_us(us)
    if moment is None:
        return None
    if use_tz is None:
        use_tz = settings.USE_TZ
    return moment if use_tz else timezone.make_naive(moment, timezone.get_default_timezone())


def parse_run_after(text: str) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise PayloadError(f"the row's run_after is not an ISO datetime: {text[:40]!r}") from None


def readable_run_after(text: str) -> str:
    """A row's run_after text as a Task here may hold it.

    A naive time was written while USE_TZ was False, its due time read in TIME_ZONE
    (``enqueue_plan.due_ms``). Under USE_TZ=True no Task may hold a naive one: it is
    that same moment made aware, else every reader and worker would refuse the job
    after a project (or a test) turns USE_TZ on."""
    if not text or not settings.USE_TZ:
        return text
    moment = parse_run_after(text)
    if moment is None or timezone.is_aware(moment):
        return text
    return timezone.make_aware(moment, timezone.get_default_timezone()).isoformat()


def rebuild_task(job: Job, payload: Payload, modules: Iterable[str] = ()) -> AnyTask:
    """The Task as it was enqueued: the loaded task with the row's per-call values (what
    ``Task.using`` may change). ``takes_context`` is the code's, never the row's: it is
    how the function is written, and a deploy that adds a ``context`` parameter must
    call the new function with it (the row's flag would pass the job's first argument
    as the context and shift the rest)."""
    return _rebuild(
        payload.task,
        tuple(modules),
        job.priority,
        job.queue,
        payload.backend,
        readable_run_after(job.run_after),
        payload.idempotency_key,
    )


@lru_cache(maxsize=1024)
def _rebuild(
    path: str,
    modules: tuple[str, ...],
    priority: int,
    queue_name: str,
    backend: str,
    run_after: str,
    idempotency_key: str | None,
) -> AnyTask:
    """Cached: a worker meets the same few task signatures over and over, and building
    a Task runs the backend's whole validation (most of a no-op job's cost). Tasks are
    frozen, so one instance can serve every job; failures are not cached."""
    changes: dict[str, Any] = {
        "priority": priority,
        "queue_name": queue_name,
        "backend": backend,
        "run_after": parse_run_after(run_after),
    }
    if idempotency_key is not None:
        changes["idempotency_key"] = idempotency_key
    try:
        return replace(resolve_task(path, modules), **changes)
    except (InvalidTask, TypeError, ImproperlyConfigured) as exc:  # the last: no such backend
        raise PayloadError(f"task {path!r} cannot be rebuilt from its row: {exc}") from exc


def task_result(job: Job, payload: Payload, task: AnyTask) -> AnyTaskResult:
    """The framework's view of a row, field by field."""
    use_tz = settings.USE_TZ
    finished = job.state in ("completed", "dead")
    result = TaskResult(
        task=task,
        id=job.id,
        status=STATUS_OF_STATE[job.state],
        enqueued_at=from_server_us(job.enqueued_at, use_tz),
        started_at=from_server_us(job.started_at, use_tz),
        last_attempted_at=from_server_us(job.last_attempted_at, use_tz),
        finished_at=from_server_us(job.finished_at, use_tz) if finished else None,
        args=payload.args,
        kwargs=payload.kwargs,
        backend=payload.backend,
        errors=task_errors(job) if job.errors else [],  # most rows have none: no parse
        worker_ids=list(job.worker_ids),
    )
    if job.state == "completed":
        try:
            value = read_json(job.result or "null")
        except ValueError as exc:
            raise PayloadError(f"the result of job {job.id} cannot be read: {exc}") from None
        object.__setattr__(result, "_return_value", value)
    return result


def task_errors(job: Job) -> list[TaskError]:
    return [
        TaskError(
            exception_class_path=str(error.get("exception_class_path", "")),
            traceback=str(error.get("traceback", "")),
        )
        for error in job.error_list
        if isinstance(error, dict)
    ]
