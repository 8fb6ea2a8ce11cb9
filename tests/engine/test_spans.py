"""Each engine script call is one span (the SDK's in-memory exporter, in a process of
its own: a tracer provider is set once per process, and the suite's stays without one)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("opentelemetry.sdk")

TRACED = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.errors import StaleToken
jobs = Jobs(Connector.from_url(sys.argv[1]))
jobs.enqueue_many("spans", [NewJob(payload='{"secret": "s3cr3t-payload"}') for _ in range(2)])
claim = jobs.claim("spans", "w1", count=2)
jobs.complete_many([("spans", c.id, c.token, '"s3cr3t-result"') for c in claim.jobs])
try:
    jobs.complete("spans", claim.jobs[0].id, claim.jobs[0].token + 1)
except StaleToken:
    pass
print(json.dumps([
    {"name": s.name, "kind": s.kind.name, "attributes": dict(s.attributes),
     "status": s.status.status_code.name}
    for s in exporter.get_finished_spans()
]))
"""


def test_every_script_call_is_a_span_naming_script_queue_and_keys(url, connector):
    if connector.is_cluster:
        pytest.skip("one server is enough for the spans")
    proc = subprocess.run(
        [sys.executable, "-c", TRACED, url],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    spans = json.loads(proc.stdout.splitlines()[-1])
    assert [s["name"] for s in spans] == [
        "echomq enqueue", "echomq claim", "echomq complete", "echomq complete",
    ]  # fmt: skip
    enqueue, claim, complete, stale = spans
    assert enqueue["kind"] == "CLIENT"
    assert enqueue["attributes"]["echomq.queue"] == "spans"
    assert enqueue["attributes"]["echomq.keys"] == 5 + 2  # five of the queue, two rows
    assert claim["attributes"]["echomq.keys"] == 8 and claim["attributes"]["echomq.calls"] == 1
    assert complete["attributes"]["echomq.script"] == "complete"
    assert stale["status"] == "ERROR" and complete["status"] == "UNSET"
    assert "s3cr3t" not in proc.stdout  # no payload, result or argument in any span
