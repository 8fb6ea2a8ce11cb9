"""Without a tracer provider (the API installed, no SDK set up: this suite's own process)
no span is started (``spans.recording()``, issue 23), and a trace context the caller is
in still travels in the job, as the API's non-recording span carried it before."""

from __future__ import annotations

import pytest

from echomq_django.engine import spans
from echomq_django.payload import Payload

trace = pytest.importorskip("opentelemetry.trace")
pytestmark = pytest.mark.django_db

TRACE_ID, SPAN_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7


def test_no_provider_no_span_and_the_callers_context_still_travels(jobs):
    from tests.django import tasks

    assert not spans.recording()
    remote = trace.NonRecordingSpan(
        trace.SpanContext(TRACE_ID, SPAN_ID, is_remote=True, trace_flags=trace.TraceFlags(1))
    )
    with trace.use_span(remote):  # e.g. a request's traceparent, extracted by a middleware
        inside = tasks.add.enqueue(1, 2)
    outside = tasks.add.enqueue(3, 4)
    carried = Payload.loads(jobs.get("default", inside.id).payload).metadata
    assert carried["traceparent"] == f"00-{TRACE_ID:032x}-{SPAN_ID:016x}-01"
    assert Payload.loads(jobs.get("default", outside.id).payload).metadata is None


def test_no_provider_a_run_starts_no_span_and_its_carried_context_is_current():
    """What the task enqueues or sends on still carries the enqueuer's trace; outside
    the run the context is as it was."""
    from echomq_django import tracing

    carried = {"traceparent": f"00-{TRACE_ID:032x}-{SPAN_ID:016x}-01", "other": "x"}
    with tracing.execute_span("t", "q", "id", 1, carried) as span:
        current = trace.get_current_span()
        span.set("echomq.outcome", "success")  # a no-op, not an error
        assert not current.is_recording()
        assert current.get_span_context().trace_id == TRACE_ID
        assert tracing.metadata() == {"traceparent": carried["traceparent"]}
    assert not trace.get_current_span().get_span_context().is_valid
    with tracing.execute_span("t", "q", "id", 1, None):
        assert not trace.get_current_span().get_span_context().is_valid
