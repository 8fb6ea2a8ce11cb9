"""What every enqueue of one Task has in common, worked out once per Task (issue 23).

A Task is frozen: its path, queue, priority, job options, flow control, commit mode
and the fixed part of its payload are the same at every call. The backend builds
an ``EnqueuePlan`` the first time a Task is enqueued (after validating it) and
remembers it, so a call does only its own work: the arguments, the job id, the
payload's text, the concurrency key, and run_after with the row's due time.

run_after is the call's Task's, never the plan's: the memo finds a plan by Task
equality, and Tasks that compare equal can differ there (a naive time in a DST
fold with ``fold=1``; the same instant at another UTC offset, whose text the row
keeps).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from . import tracing
from .compat import AnyTask
from .engine.jobs import DEFAULT_RESULT_TTL_MS, NewJob
from .engine.limits import RateLimit
from .engine.times import to_ms
from .flow import TaskFlow
from .options import JobOptions
from .payload import PayloadTemplate


@dataclass(frozen=True, slots=True)
class EnqueuePlan:
    """A Task's enqueues: the NewJob fields they share, and how a call adds its own."""

    commit_mode: bool | str  # the backend's ENQUEUE_ON_COMMIT, or the task's own choice
    payload: PayloadTemplate
    job_fields: Mapping[str, Any]  # NewJob keywords every call shares
    flow: TaskFlow
    queue_rate: RateLimit | None
    limits: str  # the row's gates when no concurrency key makes them per call

    @classmethod
    def of(
        cls,
        task: AnyTask,
        *,
        backend: str,
        options: JobOptions,
        flow: TaskFlow,
        queue_rate: RateLimit | None,
        commit_mode: bool | str,
    ) -> EnqueuePlan:
        """The plan of a valid ``task`` with its backend's view of it (the backend's alias,
        the task's options over the backend's, its flow, its queue's rate limit)."""
        path = task.module_path
        idempotency_key = getattr(task, "idempotency_key", None)
        row_fields = options.new_job_fields()
        if flow.throttle_ms:  # the window's job answers while its row exists: keep it as long
            kept = row_fields.get("result_ttl_ms", DEFAULT_RESULT_TTL_MS)
            row_fields["result_ttl_ms"] = max(kept, flow.throttle_ms)
        return cls(
            commit_mode=commit_mode,
            payload=PayloadTemplate.of(path, backend, task.takes_context, idempotency_key),
            job_fields={
                "task": path,
                "priority": int(task.priority),
                "idempotency_key": idempotency_key,
                "throttle_ms": flow.throttle_ms,
                "debounce_ms": flow.debounce_ms,
                **row_fields,
            },
            flow=flow,
            queue_rate=queue_rate,
            limits="" if flow.key is not None else flow.limits(path, queue_rate, (), {}),
        )

    def new_job(
        self,
        args: list[Any],
        kwargs: dict[str, Any],
        run_after: datetime | None,
        *,
        traced: bool = True,
    ) -> NewJob:
        """The job of one call (``args``/``kwargs`` encoded already; not yet validated),
        due at ``run_after``: the call's Task's (a naive one is in TIME_ZONE).

        ``traced``: it carries the current trace context. Not a periodic schedule's
        template: it is built once, wherever (a traced admin request, a reaper's
        start), and every job it fires would join that one stale trace."""
        limits = self.limits
        if self.flow.key is not None:  # the key is a function of the arguments
            path = self.job_fields["task"]
            limits = self.flow.limits(path, self.queue_rate, args, kwargs)
        return NewJob(
            payload=self.payload.render(args, kwargs, tracing.metadata() if traced else None),
            due_ms=due_ms(run_after),
            run_after="" if run_after is None else run_after.isoformat(),
            limits=limits,
            **self.job_fields,
        )


def due_ms(run_after: datetime | None) -> int:
    """Absolute Unix ms of ``run_after`` (0: now).

    A naive value (USE_TZ=False) is in TIME_ZONE, as Django's naive ``timezone.now()``
    is, whatever zone is activated.
    """
    if run_after is None:
        return 0
    if timezone.is_naive(run_after):
        run_after = timezone.make_aware(run_after, timezone.get_default_timezone())
    return max(0, to_ms(run_after))
