"""OpenTelemetry spans for the engine's script calls, when the ``[otel]`` extra is there.

The one guarded import of ``opentelemetry`` (the Django layer's ``tracing`` module
reuses it): without the API installed ``trace`` is None and the connector calls
its scripts without a span or any other cost. A span names the script, the queue
and the key count, never an argument (arguments carry payloads and results).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
except ImportError:  # the [otel] extra is not installed
    trace = None  # type: ignore[assignment]
    propagate = None  # type: ignore[assignment]
    otel_context = None  # type: ignore[assignment]

__all__ = [
    "TRACER_NAME", "note_refusals", "otel_context", "propagate", "script_span",
    "started_script_span", "trace",
]  # fmt: skip
TRACER_NAME = "echomq_django.engine"


def recording() -> bool:
    """Whether a span started now could be recorded: the API is there and an application
    set a tracer provider (not the API's proxy or no-op one).

    Without one, a span is the API's non-recording span carrying its parent's context:
    skipping it changes nothing a caller can see (the trace context a job carries is the
    parent's either way), and saves its context switch, about 10-20 µs per enqueue and
    per script call (issue 23). Asked per call, so a provider set later is used at once.
    """
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def script_span(script: str, keys: Sequence[str], calls: int = 1) -> Any:
    """The CLIENT span of one script call (``calls`` > 1: a pipeline of that many), current
    while the call runs."""
    assert trace is not None  # the connector calls this only when recording()
    return trace.get_tracer(TRACER_NAME).start_as_current_span(
        f"echomq {script}", kind=trace.SpanKind.CLIENT, attributes=_attributes(script, keys, calls)
    )


def started_script_span(script: str, keys: Sequence[str], calls: int = 1) -> Any:
    """The same span for calls whose replies are read later (a worker's wire): started
    now, ended by the caller (``span.end()``) when they are answered."""
    assert trace is not None  # called only when recording()
    return trace.get_tracer(TRACER_NAME).start_span(
        f"echomq {script}", kind=trace.SpanKind.CLIENT, attributes=_attributes(script, keys, calls)
    )


def _attributes(script: str, keys: Sequence[str], calls: int) -> dict[str, Any]:
    first = keys[0] if keys else ""
    queue = first[first.find("{") + 1 : first.find("}")] if "{" in first else ""
    return {
        "db.system.name": "redis",
        "db.operation.name": "EVALSHA",
        "echomq.script": script,
        "echomq.queue": queue,
        "echomq.keys": len(keys),
        "echomq.calls": calls,
    }


def note_refusals(span: Any, replies: Sequence[Any]) -> None:
    """A pipeline's span is an error when one of its calls, or one job of a batch call,
    was refused (the others ran)."""
    entries = [e for r in replies for e in (r if isinstance(r, list) else [r])]
    refused = [e for e in entries if isinstance(e, Exception)]
    if refused and trace is not None:
        span.set_attribute("echomq.refused", len(refused))
        span.set_status(trace.Status(trace.StatusCode.ERROR, type(refused[0]).__name__))
