"""Run one claimed job as a Django Task: the worker's handler.

``execute(claimed)`` turns a row into a call of a loaded Task object and reports
the outcome; it never raises (whatever a task or a signal receiver does, the
worker keeps going). What it does, in order:

1. ``close_old_connections()`` after each job, like a request, and before one when
   its thread was idle since its last (a connection may have gone stale meanwhile;
   back to back, the check after the last job is the check before this one).
2. Decode the payload and resolve the task to a Task object (loaded, or in a
   module of an installed app; see :mod:`echomq_django.payload`). A row that cannot be run
   (corrupt, unknown task such as ``os.system``, backend not configured here) is
   refused: ``Failure(retry=False)``, so it goes to dead with the reason, never called.
3. Build the TaskResult from the claimed row (RUNNING, attempts = len(worker_ids)),
   send ``task_started`` with the backend class as sender, call the task (sync,
   or a coroutine through ``async_to_sync``; ``TaskContext`` first when
   ``takes_context``).
4. A JSON return value is ``Success``. A raised exception, or a return value with
   no JSON form or over ``MAX_PAYLOAD`` as JSON (the row keeps it for its
   retention), is ``Failure`` with ``{"exception_class_path", "traceback"}``.
   Whether it is retried is the task's opt-in rule (:mod:`echomq_django.retries`;
   by default it is not: the task is FAILED at once, as on Django's backends).
   ``task_finished`` is sent when the task is finished: on success, and on the
   failure that ends it. It is sent inside the ``except`` block, as Django's
   backends do, so the framework's logger records the traceback. A failed
   attempt that may be retried is logged by the worker, once the server has
   said what became of it (retried or dead), its traceback on that line; its
   result reads READY with the errors so far until the next attempt starts.
   A run ended outside the task's process (killed, crashed) cannot send it: the
   worker does (``finished_outside``).

``KeyboardInterrupt`` or ``SystemExit`` raised *by a task* (``sys.exit()`` in
task code) is a failed attempt like any other exception: recorded, retried
only under the task's rule, never propagated into the worker. Django's
ImmediateBackend re-raises KeyboardInterrupt because there the task runs in the
user's own thread; here tasks run in the worker's threads, and Ctrl-C reaches
the worker's main thread, whose handler stops claiming and lets running jobs
finish or go back to pending (the worker's business, not the task's).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction
from django.db import close_old_connections
from django.utils import timezone

from . import conf, tracing
from .backends import EchoMQBackend
from .compat import (
    AnyTask,
    AnyTaskResult,
    Task,
    TaskError,
    TaskResultStatus,
    task_backends,
    task_finished,
    task_started,
)
from .context import EchoMQTaskContext
from .engine.error_record import ErrorRecord
from .engine.errors import CorruptRow, EchoMQError
from .engine.jobs import Claimed, Job
from .engine.worker import Failure, Outcome, Success, failure_from_exception
from .engine.worker.lease import this_run_abandoned
from .exceptions import PayloadError
from .payload import Payload, storable
from .results import rebuild_task, task_result
from .retries import NO_RETRY, Decision, decide

logger = logging.getLogger("echomq.execution")
# Built once: json.dumps with any option builds a new encoder per call.
RESULT_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


# Set by ``in_place()``: the exceptions tasks raised, kept for the caller (None: a worker).
_raised: ContextVar[list[BaseException] | None] = ContextVar("echomq_raised", default=None)


@contextmanager
def in_place() -> Iterator[list[BaseException]]:
    """Run jobs in the caller's own thread and transaction (the test plugin's ``drain``).

    ``close_old_connections()`` is skipped: inside a test's transaction it would
    close the connection and doom the transaction. The exceptions that tasks
    raise (and refusals) are appended to the yielded list, so the caller can
    re-raise them; the outcome reported is the same as a worker's.
    """
    raised: list[BaseException] = []
    token = _raised.set(raised)
    try:
        yield raised
    finally:
        _raised.reset(token)


# These two stay here, not in exceptions.py: a row's error list names them by this dotted path.
class NonJSONReturnValue(EchoMQError, TypeError, ValueError):
    """The task returned a value that cannot be stored as JSON: the task fails.

    Both bases of what Django's ``normalize_json`` raises for it (TypeError for a type
    with no JSON form, ValueError for bytes that are not UTF-8), so a result's
    ``errors[0].exception_class`` is a subclass of the one Django's backends record.
    """


class ReturnValueTooLarge(EchoMQError, ValueError):
    """The task's return value is bigger as JSON than MAX_PAYLOAD: the task fails."""


# A thread's jobs closer together than this share one connection check between them.
CONNECTIONS_CHECKED_S = 1.0
_checked = threading.local()  # .at: when this thread last checked its connections


def execute(claimed: Claimed) -> Outcome:
    """Run the claimed job's task once and say how it went. Never raises."""
    worker = _raised.get() is None
    try:
        if worker and time.monotonic() - getattr(_checked, "at", 0.0) > CONNECTIONS_CHECKED_S:
            close_old_connections()
        try:
            return run(claimed)
        finally:
            if worker:
                close_old_connections()
                _checked.at = time.monotonic()
    except BaseException as exc:  # a bug here must not kill the worker
        logger.exception("EchoMQ could not run job %s", claimed.id)
        return failure_from_exception(exc)


def run(claimed: Claimed) -> Outcome:
    if claimed.job is None:
        return refuse(claimed.id, CorruptRow(claimed.corrupt or "the row cannot be read"))
    job = claimed.job
    try:
        payload, result, backend = prepare(job)
    except Exception as exc:
        return refuse(claimed.id, exc)
    with tracing.execute_span(
        job.task, job.queue, job.id, job.counted_attempts, payload.metadata
    ) as span:
        outcome = call(job, result, backend)
        span.set("echomq.outcome", "success" if isinstance(outcome, Success) else "failure")
        if isinstance(outcome, Failure):
            span.set("echomq.retry", outcome.retry)
            span.failed(outcome)
        return outcome


def prepare(job: Job) -> tuple[Payload, AnyTaskResult, EchoMQBackend]:
    """The payload, TaskResult and backend of a runnable row, or an error saying why not."""
    payload = Payload.loads(job.payload)
    try:
        backend = task_backends[payload.backend]
    except Exception as exc:
        raise PayloadError(f"task backend {payload.backend!r} is not configured here") from exc
    if not isinstance(backend, EchoMQBackend):
        raise PayloadError(f"task backend {payload.backend!r} is not an EchoMQBackend here")
    task = rebuild_task(job, payload, backend.task_modules)
    return payload, task_result(job, payload, task), backend


def refuse(job_id: str, exc: BaseException) -> Failure:
    """A row that must never run: dead at once, with the reason."""
    logger.error("EchoMQ refused job %s: %s", job_id, exc)
    keep(exc)
    return replace(failure_from_exception(exc), retry=False)


def call(job: Job, result: AnyTaskResult, backend: EchoMQBackend) -> Outcome:
    """Signals around one call of the task; the outcome for the worker."""
    task = result.task
    sender = type(backend)
    began = time.monotonic()
    try:
        task_started.send(sender=sender, task_result=result)
        args = (
            [EchoMQTaskContext(task_result=result), *result.args]
            if task.takes_context
            else result.args
        )
        text, value = to_json(call_task(task, args, result.kwargs), conf.get_jobs().max_payload)
    except BaseException as exc:
        keep(exc)
        record = ErrorRecord.of(exc)  # one traceback, for the TaskResult and the row
        result.errors.append(task_error(record))
        object.__setattr__(result, "status", TaskResultStatus.FAILED)  # what backoff() sees
        decision = retry_decision(exc, job, result, backend)
        if not decision.retry:  # a retried attempt is the worker's job event line (traceback too)
            finish(sender, result, TaskResultStatus.FAILED, began)  # in except: exc_info is set
        return replace(
            failure_from_exception(exc, record),
            retry=decision.retry,
            backoff_ms=decision.backoff_ms,
        )
    object.__setattr__(result, "_return_value", value)
    finish(sender, result, TaskResultStatus.SUCCESSFUL, began)
    return Success(text)


def call_task(task: AnyTask, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """``task.call(*args, **kwargs)``, as Django's ``Task.call`` makes it (a coroutine
    function through ``async_to_sync``), without asking at every call whether the function
    is one: a Task is frozen, its function never changes. A Task class with a ``call`` of
    its own is called through it."""
    if type(task).call is not Task.call:
        return task.call(*args, **kwargs)
    func = task.func
    coroutine = _coroutine_functions.get(func)
    if coroutine is None:
        coroutine = _coroutine_functions[func] = iscoroutinefunction(func)
    if coroutine:
        return async_to_sync(func)(*args, **kwargs)
    return func(*args, **kwargs)


_coroutine_functions: dict[Callable[..., Any], bool] = {}


def retry_decision(
    exc: BaseException, job: Job, result: AnyTaskResult, backend: EchoMQBackend
) -> Decision:
    """The task's retry rule applied to this failure (see :mod:`echomq_django.retries`).

    The attempt budget is the row's (fixed at enqueue); the backoff and the
    exception filters are the task's as loaded here. A return value that cannot
    be stored is never retried: the task ran to the end, and would again.
    """
    if isinstance(exc, NonJSONReturnValue | ReturnValueTooLarge):
        return NO_RETRY
    task = result.task
    return decide(
        exc,
        result,
        used=job.counted_attempts,
        max_attempts=job.max_attempts,
        backoff=backend.options_for(task).backoff,
        retry_on=getattr(task, "retry_on", ()),
        no_retry_on=getattr(task, "no_retry_on", ()),
    )


def to_json(value: Any, limit: int) -> tuple[str, Any]:
    """The return value as the row stores it, and as a reader of the row gets it back;
    a typed error when it cannot be stored as it is (see ``payload.storable``)."""
    if value is None:  # most tasks return nothing: "null" needs no encoder
        return "null", None
    try:
        text, stored = storable(value, RESULT_ENCODER)
    except (TypeError, ValueError) as exc:
        raise NonJSONReturnValue(
            f"the return value ({type(value).__name__}) cannot be stored as JSON: {exc}"
        ) from exc
    if len(text) > limit:  # ASCII (the encoder escapes the rest): characters are bytes
        raise ReturnValueTooLarge(
            f"the return value is {len(text)} bytes as JSON, over the limit of {limit} "
            "(settings.ECHOMQ['MAX_PAYLOAD'])"
        )
    return text, stored


def finish(sender: type, result: AnyTaskResult, status: TaskResultStatus, began: float) -> None:
    """Send ``task_finished``; a failing receiver is logged, never changes the outcome.

    ``began``: the monotonic time the call began. The result's finished_at is on the
    server's clock, as its started_at is: the run's start (the lease's server base)
    plus the run's monotonic duration. This worker's own clock may be seconds off the
    server's, and finished_at would then precede started_at. The row gets the
    server's own time when the outcome lands. A run the worker abandoned (stuck past
    its soft stop) sends nothing when it returns at last: the worker sent its
    ``task_finished`` (FAILED, as stored) when it gave it up."""
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", finished_at(result, began))
    if this_run_abandoned():
        return
    try:
        task_finished.send(sender=sender, task_result=result)
    except Exception:
        logger.exception("a task_finished receiver failed for task %s", result.id)


def finished_at(result: AnyTaskResult, began: float) -> datetime:
    """When a run that began at monotonic ``began`` ended, on its start's clock."""
    start = result.last_attempted_at
    if start is None:  # a row with no server start (never, from a worker's lease)
        return timezone.now()
    return start + timedelta(seconds=time.monotonic() - began)


def finished_outside(queue: str, job_id: str) -> None:
    """``task_finished`` for a task whose last run ended outside its process: a child
    killed at its time limit or by an operator's cancel, one that crashed, or a worker
    that died (the reaper moved the job to dead). The task could not send it; the worker
    or the reaper sends it, with the result as stored (FAILED)."""
    try:
        job = conf.get_jobs().get(queue, job_id)  # (a supervisor holds no rows)
        if job is None:
            return
        _, stored, backend = prepare(job)  # the stored row, of a task this process may run
    except Exception:  # a row it cannot read: the worker's log line is all there is
        logger.exception("task_finished for job %s could not be sent", job_id)
        return
    try:
        task_finished.send(sender=type(backend), task_result=stored)
    except Exception:
        logger.exception("a task_finished receiver failed for task %s", stored.id)


def keep(exc: BaseException) -> None:
    """Hand the exception to an ``in_place()`` caller, if there is one."""
    raised = _raised.get()
    if raised is not None:
        raised.append(exc)


def task_error(record: ErrorRecord) -> TaskError:
    """The TaskResult's error: the very record the row keeps (storable, bounded)."""
    return TaskError(exception_class_path=record.class_path, traceback=record.traceback)
