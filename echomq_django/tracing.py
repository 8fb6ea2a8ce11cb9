"""OpenTelemetry spans for enqueue and execute, the trace carried in the job.

Optional: ``pip install echomq-django[otel]`` (``opentelemetry-api`` only; the
application brings the SDK and its exporters, as with any instrumented library).
Without the API installed every function here is a no-op; with the API but no tracer
provider set, no span is started either (``spans.recording()``), and a trace context
the caller or the job carries still travels on. The engine's script calls have spans
of their own (``engine/spans.py``).

* ``enqueue_span(task, queue)``: a PRODUCER span ``echomq enqueue <task>`` around
  the enqueue; ``metadata()`` inside it is the W3C trace context
  (``{"traceparent": ..., "tracestate": ...}``) that the job's payload carries as
  its ``metadata`` (the shape of Django's task metadata proposal: a dict of
  strings, stored with the job).
* ``execute_span(...)``: the worker's CONSUMER span ``echomq execute <task>``, a
  child of the enqueuer's span (the context is read back from the metadata), with
  the job id, queue, attempt and, at the end, the outcome
  (``success``/``failure``, and whether a retry was asked for). A failed attempt
  sets the span's status to ERROR with ``error.type`` (the exception's class path)
  and an ``exception`` event carrying the stored traceback, as OpenTelemetry's
  conventions ask: the task's exception is an outcome here, never raised through
  the span, so nothing would record it otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from .engine.error_record import ErrorRecord
from .engine.outcome import Failure
from .engine.spans import otel_context, propagate, recording, trace  # the one guarded import

TRACER_NAME = "echomq_django"
METADATA_KEYS = ("traceparent", "tracestate")


class Span:
    """What the code inside ``execute_span`` may record (a no-op without a real span)."""

    def __init__(self, span: Any = None) -> None:
        self._span = span

    def set(self, name: str, value: str | int | bool) -> None:
        if self._span is not None:
            self._span.set_attribute(name, value)

    def failed(self, failure: Failure) -> None:
        """The attempt failed: ERROR status, ``error.type``, and the exception event."""
        if self._span is None:
            return
        error = failure.error
        kind = error.class_path if isinstance(error, ErrorRecord) else "builtins.Exception"
        self._span.set_status(trace.Status(trace.StatusCode.ERROR, failure.summary))
        self._span.set_attribute("error.type", kind)
        self._span.add_event(
            "exception",
            {
                "exception.type": kind,
                "exception.message": failure.summary,
                "exception.stacktrace": error.traceback if isinstance(error, ErrorRecord) else "",
            },
        )


def _tracer() -> Any:
    return trace.get_tracer(TRACER_NAME)


def enqueue_span(task: str, queue: str, count: int) -> Any:
    """The span around one enqueue call (``count`` jobs of ``task``)."""
    if not recording():
        return nullcontext()
    return _tracer().start_as_current_span(
        f"echomq enqueue {task}",
        kind=trace.SpanKind.PRODUCER,
        attributes={
            "messaging.system": "echomq",
            "messaging.operation.type": "send",
            "messaging.destination.name": queue,
            "messaging.batch.message_count": count,
            "echomq.task": task,
        },
    )


def metadata() -> dict[str, str] | None:
    """The current trace context as a job carries it; None outside any recorded trace."""
    if propagate is None or not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {k: v for k, v in carrier.items() if k in METADATA_KEYS} or None


NO_SPAN = nullcontext(Span())  # what a run is in when nothing is traced: nothing to do


def execute_span(
    task: str, queue: str, job_id: str, attempt: int, carried: Mapping[str, Any] | None
) -> AbstractContextManager[Span]:
    """The span of one run of a job, a child of the span that enqueued it (if any).

    Without a tracer provider no span is started (a fifth of a no-op job's run went
    to the API's non-recording one); a carried context is still made current, so
    what the task sends on (a job it enqueues, a request) carries it, as before."""
    if trace is None or not (carried or recording()):
        return NO_SPAN
    return _execute_span(task, queue, job_id, attempt, carried)


@contextmanager
def _execute_span(
    task: str, queue: str, job_id: str, attempt: int, carried: Mapping[str, Any] | None
) -> Iterator[Span]:
    strings = (
        {k: v for k, v in carried.items() if k in METADATA_KEYS and isinstance(v, str)}
        if carried
        else None
    )
    parent = propagate.extract(strings) if strings else None
    if not recording():
        token = None if parent is None else otel_context.attach(parent)
        try:
            yield Span()
        finally:
            if token is not None:
                otel_context.detach(token)
        return
    with _tracer().start_as_current_span(
        f"echomq execute {task}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes={
            "messaging.system": "echomq",
            "messaging.operation.type": "process",
            "messaging.destination.name": queue,
            "messaging.message.id": job_id,
            "echomq.task": task,
            "echomq.attempt": attempt,
        },
        record_exception=False,  # a task's exception is an outcome here, never raised
        set_status_on_exception=False,
    ) as span:
        yield Span(span)
