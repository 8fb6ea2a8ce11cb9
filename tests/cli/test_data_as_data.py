"""The CLI prints data as data: row text is never rich markup, never terminal control.

An argument ``[/]`` used to crash ``echomq inspect`` (rich read it as a closing
tag), ``[link=...]`` emitted a terminal hyperlink, and an ESC sequence in an
exception message (clear screen, OSC 8 links, a CR that rewrites a line, a bidi
override) reached the operator's terminal raw. Output here goes to a pipe, so
rich adds no escape sequence of its own: any ESC found came from the data.
"""

from __future__ import annotations

import json
import logging

from echomq_django.engine import registry
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.logs import TextFormatter
from echomq_django.management import printable
from tests.cli.conftest import echomq_cmd, enqueue, manage_py

HOSTILE = (
    "[/] [link=https://evil.example]click[/link] :smile: \x1b[2J\x1b]8;;https://x\x07y\x07\rz\u202e"
)


def assert_inert(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text and "\u202e" not in text
    assert "[/]" in text and "[link=https://evil.example]" in text and ":smile:" in text
    assert r"\x1b[2J" in text and r"\u202e" in text


def test_inspect_prints_row_text_as_data(jobs, redis_client):
    (job_id,) = enqueue(jobs)
    error = json.dumps({"exception_class_path": "builtins.ValueError", "traceback": HOSTILE})
    (claimed,) = jobs.claim("default", "w1", lease_ms=60_000).jobs
    jobs.retry("default", claimed.id, claimed.token, error=error, summary=HOSTILE)
    redis_client.hset(QueueKeys.of("default").job(job_id), "task", HOSTILE)
    out = echomq_cmd("inspect", job_id).out
    assert_inert(out)
    assert json.loads(echomq_cmd("inspect", job_id, "--json").out)["last_error"].startswith("[/]")


def test_workers_print_registry_text_as_data(jobs):
    info = registry.WorkerInfo(
        id="w-1", host=HOSTILE, pid=1, queues=["default"], concurrency=1, running=[HOSTILE],
        started_at=1.0, last_seen=2.0,
    )  # fmt: skip
    registry.heartbeat(jobs.connector, info)
    out = echomq_cmd("workers").out
    assert "\x1b" not in out and "[/]" in out


def test_log_lines_escape_what_tasks_raise(jobs):
    record = logging.LogRecord("echomq.worker", logging.ERROR, __file__, 1, "job failed: %s",
                               (HOSTILE,), None)  # fmt: skip
    line = TextFormatter("%(message)s").format(record)
    assert "\x1b" not in line and r"\x1b[2J" in line
    assert printable("a\nb\tc") == "a\nb\\tc"


def test_a_worker_logging_a_hostile_exception_keeps_the_terminal_clean(jobs, echomq):
    """The real path: runworker runs a task that raises with ESC in its message."""
    from tests.django.tasks import fail

    fail.using(queue_name="default").enqueue(HOSTILE)
    done = manage_py(
        "runworker", "default", "--burst", url=echomq, settings="tests.django.settings"
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stderr and r"\x1b[2J" in done.stderr
