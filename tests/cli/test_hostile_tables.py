"""Every table the ``echomq`` command prints shows server data escaped, whatever the column.

Each kind of text a table shows is planted with terminal controls: a limit's name
and spec, a schedule's task, time zone and timing, a job id that is only a member
of a place's sorted set, a job row's fields, a worker's registry entry. Output
goes to a pipe, so rich adds no control of its own: any found came from the data.
"""

from __future__ import annotations

import pytest

from echomq_django.engine import registry
from echomq_django.engine.keyspace import QueueKeys
from tests.cli.conftest import echomq_cmd, enqueue

# ESC (clear screen, an OSC 8 hyperlink), C1 CSI, BEL, CR, bidi override and isolate
CONTROLS = ("\x1b", "\x9b", "\x07", "\r", "\u202e", "\u2066")
HOSTILE = "x\x1b[2J\x1b]8;;http://evil\x1b\\click\x9b31m\x07\rRED\u202eLIVE\u2066"


@pytest.fixture
def planted(jobs, redis_client):
    """The server's data, hostile in every place a table reads from; the job's id."""
    keys = QueueKeys.of("default")
    (job_id,) = enqueue(jobs)
    redis_client.hset(keys.job(job_id), mapping={"task": HOSTILE, "last_error": HOSTILE})
    redis_client.zadd(keys.pending, {f"\x1b[2J{HOSTILE}EVIL-ID": 1})
    redis_client.hset(keys.limits, f"conc:{HOSTILE}", HOSTILE)
    redis_client.zadd(keys.schedules, {"nightly": 4_000_000_000_000})
    redis_client.hset(
        keys.schedule("nightly"),
        mapping={"task": HOSTILE, "timezone": HOSTILE, "cron": HOSTILE, "catch_up": HOSTILE},
    )
    registry.heartbeat(
        jobs.connector,
        registry.WorkerInfo(
            id="w-1",
            host=HOSTILE,
            pid=1,
            queues=["default"],
            concurrency=1,
            running=[job_id],
            started_at=1.0,
            last_seen=2.0,
        ),
    )
    return job_id


@pytest.mark.parametrize(
    "args",
    [
        ("stats",),
        ("jobs", "default", "pending"),
        ("workers",),
        ("inspect", "{job_id}"),
        ("schedules",),
        ("ping",),
    ],
    ids=lambda args: args[0],
)
def test_no_table_lets_a_control_through(planted, args):
    out = echomq_cmd(*(a.format(job_id=planted) for a in args)).out
    for control in CONTROLS:
        assert control not in out, f"{control!r} reaches the terminal from echomq {args[0]}"
    if args[0] != "ping":  # the one view of no planted text
        assert r"\x1b" in out, out  # shown, as its escape


def test_a_printed_line_is_escaped_too(jobs):
    """Not only tables: a string the console prints goes through the same point."""
    from io import StringIO

    from echomq_django.cli_views import DataConsole

    console = DataConsole(file=StringIO(), width=200)
    console.print(f"[link=http://evil]{HOSTILE}[/link]")
    out = console.file.getvalue()
    assert not any(control in out for control in CONTROLS)
    assert "[link=http://evil]" in out and r"\u202e" in out
