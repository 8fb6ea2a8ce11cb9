"""OpenTelemetry: the enqueuer's trace context travels in the job, and a real runworker
process's execute span is the child of the enqueue span (the SDK's in-memory exporter in
both processes: see settings_otel.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from echomq_django.payload import Payload

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
ENQUEUE = """
import json
from opentelemetry import trace
from tests.django import tasks
with trace.get_tracer("a-view").start_as_current_span("POST /orders/"):
    ok = tasks.add.enqueue(1, 2)
    failing = tasks.fail.enqueue("kaput")  # max_attempts=2: two runs, one trace
alone = tasks.add.enqueue(3, 4)  # outside any trace
print(json.dumps([ok.id, failing.id, alone.id]))
"""


def manage_py(url: str, spans: Path, *args: str) -> tuple[str, list[dict]]:
    """Run manage.py under the SDK settings; (its stdout, the spans it recorded)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.otel.settings_otel",
        "ECHOMQ_TEST_URL": url,
        "ECHOMQ_OTEL_SPANS": str(spans),
    }
    proc = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, [json.loads(line) for line in spans.read_text().splitlines()]


def test_the_execute_span_is_a_child_of_the_enqueue_span(jobs, url, tmp_path):
    """Both sides are real processes (a tracer provider is set once per process: the
    test's own process stays without one, so other tests never see one)."""
    out, mine = manage_py(url, tmp_path / "enqueue.jsonl", "shell", "-c", ENQUEUE)
    ok, failing, alone = json.loads(out.splitlines()[-1])  # shell may print a banner first
    (view,) = [s for s in mine if s["name"] == "POST /orders/"]
    add_enqueue, fail_enqueue, alone_enqueue = (
        s for s in mine if s["name"].startswith("echomq enqueue ")
    )
    assert add_enqueue["parent_id"] == view["span_id"] == fail_enqueue["parent_id"]
    assert add_enqueue["kind"] == "PRODUCER"
    assert add_enqueue["attributes"]["messaging.destination.name"] == "default"
    assert alone_enqueue["parent_id"] is None  # an enqueue outside any trace starts one
    carried = Payload.loads(jobs.get("default", ok).payload).metadata
    assert carried["traceparent"].split("-")[1:3] == [
        f"{add_enqueue['trace_id']:032x}",
        f"{add_enqueue['span_id']:016x}",
    ]

    _, spans = manage_py(
        url, tmp_path / "worker.jsonl", "runworker", "default", "emails", "--burst"
    )
    executed = {
        (s["attributes"]["messaging.message.id"], s["attributes"]["echomq.attempt"]): s
        for s in spans
        if s["name"].startswith("echomq execute ")
    }
    assert sorted(executed) == sorted([(ok, 1), (failing, 1), (failing, 2), (alone, 1)])
    run = executed[(ok, 1)]
    assert (run["trace_id"], run["parent_id"]) == (add_enqueue["trace_id"], add_enqueue["span_id"])
    assert run["kind"] == "CONSUMER"
    assert run["attributes"]["echomq.outcome"] == "success"
    assert run["attributes"]["messaging.destination.name"] == "default"
    first, last = executed[(failing, 1)], executed[(failing, 2)]
    assert {first["parent_id"], last["parent_id"]} == {fail_enqueue["span_id"]}
    assert (first["attributes"]["echomq.outcome"], first["attributes"]["echomq.retry"]) == (
        "failure",
        True,
    )
    assert last["attributes"]["echomq.retry"] is False
    # A failed attempt is an error to a trace backend: status, error.type, the exception.
    for attempt in (first, last):
        assert attempt["status"] == "ERROR"
        assert attempt["attributes"]["error.type"] == "builtins.ValueError"
        (event,) = attempt["events"]
        assert (event["name"], event["exception.type"]) == ("exception", "builtins.ValueError")
        assert event["exception.message"] == "ValueError: kaput"
        assert "raise ValueError(message)" in event["exception.stacktrace"]
    assert (run["status"], run["events"]) == ("UNSET", [])
    assert executed[(alone, 1)]["parent_id"] == alone_enqueue["span_id"]


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_with_the_api_but_no_sdk_no_metadata_is_written():
    """The API's no-op tracer: no valid span, so the payload stays as it was."""
    proc = run_python(
        "from echomq_django import tracing\n"
        "with tracing.enqueue_span('t', 'q', 1):\n"
        "    assert tracing.metadata() is None\n"
        "print('ok')\n"
    )
    assert proc.stdout == "ok\n", proc.stderr


def test_without_opentelemetry_installed_nothing_changes(tmp_path):
    """The [otel] extra absent: tracing's functions are no-ops (import blocked in a child)."""
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from echomq_django import tracing\n"
        "assert tracing.trace is None and tracing.metadata() is None\n"
        "with tracing.enqueue_span('t', 'q', 1):\n"
        "    with tracing.execute_span('t', 'q', 'id', 1, {'traceparent': 'x'}) as span:\n"
        "        span.set('echomq.outcome', 'success')\n"
        "print('ok')\n"
    )
    proc = run_python(code)
    assert proc.stdout == "ok\n", proc.stderr


SCHEDULE = """
import json
from opentelemetry import trace
from echomq_django import schedules
spec = {"task": "tests.django.tasks.add", "every": 60, "args": [1, 2]}
plain = schedules.build("sums", spec)
with trace.get_tracer("admin").start_as_current_span("GET /admin/echomq/schedules/"):
    traced = schedules.build("sums", spec)
print(json.dumps([plain.job.payload, traced.job.payload, plain.digest, traced.digest]))
"""


def test_a_schedule_built_inside_a_trace_carries_none(jobs, url, tmp_path):
    """A schedule's template is built wherever (a traced admin request, a reaper's start):
    the trace current then must not mark it "edited in code", nor join every job it
    fires to that one stale trace."""
    out, _ = manage_py(url, tmp_path / "spans.jsonl", "shell", "-c", SCHEDULE)
    plain, traced, plain_digest, traced_digest = json.loads(out.splitlines()[-1])
    assert traced == plain and "traceparent" not in traced
    assert traced_digest == plain_digest
