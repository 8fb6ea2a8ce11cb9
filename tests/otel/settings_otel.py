"""tests.django.settings, plus an OpenTelemetry SDK with the in-memory exporter whose spans
are written to $ECHOMQ_OTEL_SPANS (JSON lines) when the process exits: how a test reads
the spans of a real runworker process."""

import atexit
import json
import os

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.django.settings import *  # noqa: F403

_exporter = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(_exporter))
trace.set_tracer_provider(_provider)


def _dump() -> None:
    with open(os.environ["ECHOMQ_OTEL_SPANS"], "w") as out:
        for span in _exporter.get_finished_spans():
            out.write(json.dumps(span_document(span)) + "\n")


def span_document(span) -> dict:
    context, parent = span.get_span_context(), span.parent
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": context.trace_id,
        "span_id": context.span_id,
        "parent_id": parent.span_id if parent else None,
        "attributes": dict(span.attributes),
        "status": span.status.status_code.name,
        "events": [{"name": e.name, **dict(e.attributes or {})} for e in span.events],
    }


atexit.register(_dump)
