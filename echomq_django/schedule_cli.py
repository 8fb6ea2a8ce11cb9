"""``manage.py echomq schedules``: the periodic schedules from a terminal or a script.

::

    echomq schedules [list] [--json]            every schedule: when, next and last fire, counts
    echomq schedules run-now NAME [--queue Q]   enqueue one job of NAME now
    echomq schedules pause NAME [--queue Q]     stop NAME from firing
    echomq schedules resume NAME [--queue Q]    fire NAME again from its next tick
    echomq schedules remove NAME [--queue Q]    delete an orphaned schedule's record

A name is looked up in the known queues (the registry, ECHOMQ QUEUES and the
declared schedules' queues); ``--queue`` picks one when two queues hold it.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from django.core.management.base import CommandError
from rich.table import Table

from . import conf, schedules
from .engine.errors import InvalidSchedule
from .engine.keyspace import validate_schedule_name
from .engine.scheduler import Scheduler
from .engine.stored_schedule import StoredSchedule
from .engine.times import from_ms
from .management import queue_arg
from .queue_totals import known_queues

ACTIONS = ("list", "run-now", "pause", "resume", "remove")


def _name_arg(value: str) -> str:
    try:
        return validate_schedule_name(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=ACTIONS, default="list")
    parser.add_argument("name", nargs="?", type=_name_arg, metavar="NAME")
    parser.add_argument("--queue", type=queue_arg, help="the queue that holds NAME")


def queues() -> list[str]:
    """The known queues, and the queues of the schedules declared in code."""
    names = set(known_queues(conf.get_jobs()))
    with contextlib.suppress(InvalidSchedule):  # `manage.py check` reports it
        names |= {s.queue for s in schedules.declared()}
    return sorted(names)


def find(scheduler: Scheduler, name: str, queue: str | None) -> StoredSchedule:
    """The one stored schedule called ``name`` (in ``queue``), or a CommandError."""
    _, found, unreadable = scheduler.read_many([queue] if queue else queues())
    matches = [s for s in found if s.name == name]
    if not matches:
        unread = f"; unreadable: {', '.join(unreadable)}" if unreadable else ""
        raise CommandError(
            f"no schedule {name!r} on the server (a reaper stores them at start){unread}"
        )
    if len(matches) > 1:
        where = ", ".join(s.queue for s in matches)
        raise CommandError(f"schedule {name!r} is in several queues ({where}): give --queue")
    return matches[0]


def handle(command: Any, action: str, name: str | None, queue: str | None, as_json: bool) -> None:
    """Run one ``schedules`` action for the ``echomq`` command (its console and JSON writer)."""
    scheduler = Scheduler(conf.get_jobs())
    if action == "list":
        now_ms, found, unreadable = scheduler.read_many(queues())
        for where, why in unreadable.items():
            command.stderr.write(f"cannot read the schedules of queue {where}: {why}")
        if as_json:
            command.emit_json([as_document(s) for s in found])
        else:
            command.console.print(schedules_view(found, now_ms))
        return
    if name is None:
        raise CommandError(f"schedules {action} needs the schedule's NAME")
    target = find(scheduler, name, queue)
    report: dict[str, Any] = {"queue": target.queue, "name": name, "action": action}
    if action == "run-now":
        report["job_id"] = scheduler.run_now(target.queue, name)
        text = f"Schedule {name}: job {report['job_id']} enqueued on {target.queue}."
    elif action == "pause":
        scheduler.pause(target.queue, name)
        text = f"Schedule {name} paused."
    elif action == "resume":
        report["next_ms"] = scheduler.resume(target.queue, name)
        text = f"Schedule {name} resumed: next fire {_when(report['next_ms'])}."
    else:
        scheduler.remove(target.queue, name)
        text = f"Schedule {name} removed."
    if as_json:
        command.emit_json(report)
    else:
        command.console.print(text)


def as_document(s: StoredSchedule) -> dict[str, Any]:
    return {
        "queue": s.queue,
        "name": s.name,
        "status": s.status,
        "task": s.task,
        "expression": s.expression,
        "timezone": s.timezone,
        "catch_up": s.fields.get("catch_up", ""),
        "overlap": s.fields.get("overlap", ""),
        "next_ms": s.next_ms,
        "last_tick_ms": s.last_tick,
        "last_fired_at_us": s.last_fired_at,
        "last_job": s.last_job or None,
        "fired": s.counter("fired"),
        "missed": s.counter("missed"),
        "skipped": s.counter("skipped"),
    }


def _when(ms: int | None) -> str:
    moment = None if ms is None else from_ms(ms)
    return "—" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def schedules_view(found: list[StoredSchedule], now_ms: int | None) -> Table:
    """One row per schedule (the last job's id and the policies are in ``--json``)."""
    caption = f"server time {_when(now_ms)}" if now_ms is not None else "no queue known yet"
    table = Table(title="EchoMQ schedules", caption=caption)
    table.add_column("schedule", no_wrap=True)
    for column in ("status", "task", "when", "next fire", "last fire"):
        table.add_column(column)
    table.add_column("fired·missed·skipped", justify="right")
    for s in sorted(found, key=lambda s: (s.queue, s.name)):
        counts = "·".join(str(s.counter(n)) for n in ("fired", "missed", "skipped"))
        table.add_row(
            f"{s.queue}/{s.name}", s.status, s.task, f"{s.expression} {s.timezone}",
            _when(s.next_ms), _when(s.last_tick), counts,
        )  # fmt: skip
    return table
