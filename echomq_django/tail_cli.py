"""``echomq tail``: follow the queues' job events live, from every worker.

::

    echomq tail [--queue Q ...] [--task T ...] [--since SECONDS] [--json]

Reads the queues' event streams (engine/events.py), from the moment it starts (or
``--since`` seconds before, as far as the capped streams reach), until Ctrl-C or
SIGTERM. One line per event, or with ``--json`` one JSON object per line (the job
log's field names, plus ``time``, ``queue`` and the stream entry ``id``), flushed
as it comes, so ``echomq tail --json | jq`` works on a pipe. Without ``--queue``
it follows every known queue, and picks up a queue that appears while it runs.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from . import conf
from .engine import events
from .engine.events import JobEvent
from .engine.nodes import server_time_us
from .engine.times import from_ms
from .management import printable, queue_arg, seconds_arg
from .queue_totals import known_queues

BLOCK_MS = 500  # a stop signal is seen within this long
REFRESH_QUEUES_S = 5.0  # the queue registry is read again this often (without --queue)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--queue", dest="queues", action="append", type=queue_arg, metavar="QUEUE",
        help="only this queue (repeat for several; default every known queue)",
    )  # fmt: skip
    parser.add_argument(
        "--task", dest="tasks", action="append", metavar="TASK",
        help="only jobs of this task, its dotted path (repeat for several)",
    )  # fmt: skip
    parser.add_argument(
        "--since", type=seconds_arg, metavar="SECONDS",
        help="start with the events of the last SECONDS the streams still hold",
    )  # fmt: skip


def _local(at_ms: int) -> datetime:
    """A stream entry's server time, in the operator's local zone (as the job log is)."""
    moment = from_ms(at_ms)
    return (moment or datetime.now(UTC)).astimezone()


def line(event: JobEvent) -> str:
    """The human line: time, outcome, job, task, then key=value as the job log has them."""
    d = event.as_dict()
    when = _local(event.at_ms)
    text = f"{when.isoformat(timespec='milliseconds')} {d['outcome']:<9} {d['job_id']} "
    text += f"{d['task'] or '?'}"
    if d["detail"]:
        text += f": {d['detail']}"
    text += f" queue={d['queue']} attempt={d['attempt']}/{d['max_attempts']}"
    if d["outcome"] not in ("started", "enqueued") and d["duration_ms"]:
        text += f" duration={d['duration_ms']:g}ms"
    if d["retry_in_ms"] is not None:
        text += f" retry_in={d['retry_in_ms'] / 1000:g}s"
    if d["error"]:
        text += f" error={d['error']!r}"
    if d["worker"]:
        text += f" worker={d['worker']}"
    return printable(text, keep="")


def document(event: JobEvent) -> dict[str, Any]:
    when = _local(event.at_ms)
    return {"time": when.isoformat(timespec="milliseconds"), **event.as_dict()}


class _Stop:
    """SIGTERM, and SIGINT unless the process was started with it ignored (a job in the
    background): the tail ends after its current read, at most BLOCK_MS on."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self)
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, self)

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True


def handle(
    command: Any,
    queues: Sequence[str] | None,
    tasks: Sequence[str] | None,
    since: float | None,
    as_json: bool,
) -> None:
    jobs = conf.get_jobs()
    connector = jobs.connector
    stop = _Stop()
    start_ms = server_time_us(connector) // 1000 - int((since or 0) * 1000)
    cursor = f"{start_ms}-0"  # stream entry ids are the server's ms: "after the start"
    cursors = dict.fromkeys(queues or (), cursor)
    wanted = set(tasks or ())
    out = command.stdout
    next_refresh = 0.0
    followed = ", ".join(queues) if queues else "every known queue"  # stderr: never in the JSON
    command.stderr.write(f"following the job events of {followed}; Ctrl-C to stop")
    command.stderr.flush()
    try:
        while not stop.requested:
            if not queues and time.monotonic() >= next_refresh:
                for name in known_queues(jobs):  # a queue that appears is followed too
                    cursors.setdefault(name, cursor)
                next_refresh = time.monotonic() + REFRESH_QUEUES_S
            if not cursors:  # no queue known yet
                time.sleep(BLOCK_MS / 1000)
                continue
            printed = False
            for event in events.read(connector, cursors, BLOCK_MS):
                if wanted and event.fields.get("task") not in wanted:
                    continue
                out.write((json.dumps(document(event)) if as_json else line(event)) + "\n")
                printed = True
            if printed:
                out.flush()
    except (BrokenPipeError, KeyboardInterrupt):  # `tail | head`; a Ctrl-C mid-write
        return
