"""``echomq jobs``, ``echomq workers`` and ``echomq retry``: lists of jobs and who runs them.

::

    echomq jobs QUEUE STATE [--task T] [--limit N]   a place's jobs (completed, dead: newest first)
    echomq workers                                   live workers, each running job and for how long
    echomq retry JOB_ID [--queue QUEUE]              one dead job back to pending

Every action on one job (these and ``cancel``, ``run-now``, ``delete``) is also an event
of its queue, which ``echomq tail`` shows beside the workers' events.

Reads are bounded: ``jobs`` reads pages of the place's sorted set (never the whole
set) and, with ``--task``, looks at most ``task_filter.SCAN_MAX`` jobs for matches; ``workers``
reads one row per running job. Times are the server's clock, in UTC.
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
from collections.abc import Sequence
from typing import Any

from django.core.management.base import CommandError
from rich.console import Group
from rich.table import Table

from . import conf, task_filter
from .engine import events
from .engine.errors import CorruptRow
from .engine.jobs import PAGE_MAX, Job, Jobs
from .engine.keyspace import STATES
from .engine.nodes import server_time_us
from .engine.registry import WorkerInfo, list_workers, queue_labels
from .engine.rows import counted_attempts_of, typed_fields
from .engine.times import EPOCH, from_us
from .logs import printable
from .management import count_arg, queue_arg

NEWEST_FIRST = ("completed", "dead")  # what an operator looks for there is the latest
PAGE_FIELDS = (
    "task", "attempts", "refunds", "max_attempts", "enqueued_at", "finished_at", "last_error",
)  # fmt: skip


def add_jobs_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", type=queue_arg, metavar="QUEUE")
    parser.add_argument("state", choices=STATES, metavar="STATE", help=", ".join(STATES))
    parser.add_argument("--task", help="only jobs of this task (its dotted path)")
    parser.add_argument(
        "--limit",
        type=count_arg(PAGE_MAX),
        default=50,
        help=f"at most N jobs (default 50, most {PAGE_MAX})",
    )
    parser.add_argument(
        "--oldest-first", action="store_true", help="completed and dead: oldest first"
    )


def server_now_us(jobs: Jobs) -> int:
    return server_time_us(jobs.connector)


def list_jobs(
    jobs: Jobs, queue: str, state: str, task: str | None, limit: int, oldest_first: bool = False
) -> tuple[int, list[dict[str, Any]]]:
    """(jobs in the place (of ``task``: among the first SCAN_MAX), up to ``limit`` of them)."""
    newest_first = state in NEWEST_FIRST and not oldest_first
    if task is None:
        page = jobs.page(queue, state, count=limit, newest_first=newest_first, fields=PAGE_FIELDS)
        total, entries = page.total, page.entries
    else:
        found = task_filter.of_task(
            jobs, queue, state, task, offset=0, count=limit, newest_first=newest_first,
            fields=PAGE_FIELDS,
        )  # fmt: skip
        total, entries = found.total, found.entries
    # attempts: those that count (the raw field is the fencing token, see rows.py)
    return total, [
        {
            "id": e.id,
            "score": e.score,
            **typed_fields(e.fields),
            "attempts": counted_attempts_of(e.fields),
        }
        for e in entries
    ]


def _when_us(value: object) -> str:
    moment = from_us(value)
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment and moment > EPOCH else ""


def jobs_view(queue: str, state: str, total: int, rows: Sequence[dict[str, Any]]) -> Table:
    order = "newest first" if rows and state in NEWEST_FIRST else ""
    table = Table(
        title=f"{state} jobs of {queue}",
        caption=f"{len(rows)} shown of {total}" + (f" · {order}" if order else ""),
    )
    table.add_column("id", no_wrap=True, min_width=36)  # an id is copied whole, never folded
    for name in ("task", "attempts", "enqueued", "finished", "last error"):
        table.add_column(name, overflow="fold")
    for r in rows:
        table.add_row(
            r["id"],
            r.get("task") or "",
            f"{r.get('attempts') or 0}/{r.get('max_attempts') or '?'}",
            _when_us(r.get("enqueued_at")),
            _when_us(r.get("finished_at")),
            (r.get("last_error") or "")[:120],
        )
    return table


def do_jobs(command: Any, queue: str, state: str, task: str | None, limit: int,
            oldest_first: bool, as_json: bool) -> None:  # fmt: skip
    total, rows = list_jobs(conf.get_jobs(), queue, state, task, limit, oldest_first)
    if as_json:
        command.emit_json({"queue": queue, "state": state, "total": total, "jobs": rows})
    else:
        command.console.print(jobs_view(queue, state, total, rows))


# -- workers ------------------------------------------------------------------------------


def running_jobs(jobs: Jobs, worker: WorkerInfo, now_us: int) -> list[dict[str, Any]]:
    """Each job the worker holds: its queue, task, attempt and seconds since its run began."""
    held = []
    for job_id in worker.running:
        job: Job | None = None
        for queue in worker.queues:
            try:
                job = jobs.get(queue, job_id)
            except (ValueError, CorruptRow):  # a planted id or queue name, a key that is no
                break  # job's row: shown as it is (its task "?"), the other jobs go on
            if job is not None:
                break
        began = (job.last_attempted_at or job.started_at) if job else None
        held.append(
            {
                "id": job_id,
                "queue": job.queue if job else None,
                "task": job.task if job else None,
                "attempt": job.counted_attempts if job else None,
                "running_s": round((now_us - began) / 1e6, 1) if began else None,
            }
        )
    return held


def do_workers(command: Any, as_json: bool) -> None:
    jobs = conf.get_jobs()
    workers = sorted(list_workers(jobs.connector), key=lambda w: w.id)
    now_us = server_now_us(jobs)
    documents = [{**dataclasses.asdict(w), "jobs": running_jobs(jobs, w, now_us)} for w in workers]
    if as_json:
        command.emit_json(documents)
    else:
        command.console.print(workers_view(documents, now_us / 1e6))


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def workers_view(workers: Sequence[dict[str, Any]], now: float) -> Group:
    """The workers, then their running jobs (one row each: ids are never folded)."""
    table = Table(title="EchoMQ workers", caption=f"{len(workers)} live")
    for name in ("id", "host", "pid", "queues", "running", "up", "last seen"):
        table.add_column(name, justify="right" if name in ("pid", "running") else "left")
    running = Table(title="Running jobs")
    running.add_column("job", no_wrap=True, min_width=36)
    for name in ("task", "queue", "attempt", "for", "worker"):
        right = name in ("attempt", "for")
        running.add_column(name, justify="right" if right else "left", overflow="fold")
    for w in workers:
        table.add_row(
            w["id"],
            w["host"],
            str(w["pid"]),
            ", ".join(queue_labels(w["queues"], w["sizes"])),
            f"{len(w['running'])}/{w['concurrency']}"
            + (f" in {w['processes']} processes" if w["processes"] else ""),
            _ago(now - w["started_at"]),
            f"{_ago(now - w['last_seen'])} ago",
        )
        for j in w["jobs"]:
            running.add_row(
                j["id"],
                j["task"] or "?",
                j["queue"] or "?",
                str(j["attempt"] or "?"),
                "?" if j["running_s"] is None else _ago(j["running_s"]),
                w["id"],
            )
    return Group(table, running) if running.row_count else Group(table)


def record(job: Job, outcome: str) -> None:
    """The operator's action as an event of the job's queue (``echomq tail`` shows it)."""
    events.record(
        conf.get_connector(), job.queue, outcome=outcome, job_id=job.id, task=job.task,
        attempt=job.counted_attempts, max_attempts=job.max_attempts,
        worker=f"cli@{socket.gethostname()}", detail="from the command line",
    )  # fmt: skip


# -- retry --------------------------------------------------------------------------------


def do_retry(command: Any, job: Job, as_json: bool) -> None:
    """One dead job back to pending with a fresh attempt budget (``retry-dead`` for many)."""
    if job.state != "dead":
        raise CommandError(f"job {job.id} is {job.state}, not dead: only a dead job is retried")
    engine = conf.get_jobs()
    sweep = engine.retry_dead(job.queue, [job.id])
    if not sweep.moved:
        now = engine.get(job.queue, job.id)
        if now is not None and now.state == "dead":  # refused: its last error says why
            raise CommandError(f"job {job.id} stays dead: {printable(now.last_error)}")
        raise CommandError(f"job {job.id} is no longer dead: nothing was retried")
    record(job, "requeued")
    if as_json:
        command.emit_json({"id": job.id, "queue": job.queue, "outcome": "pending"})
    else:
        command.console.print(
            f"job {job.id} ({job.queue}): back to pending with a fresh attempt budget"
        )
