"""``manage.py echomq``: look at and operate the queues from a terminal or a script.

::

    echomq stats [QUEUE ...] [--watch [SECONDS]]    jobs per queue and state, event counters
    echomq inspect JOB_ID [--queue QUEUE]           one job's row (searched in the known queues)
    echomq retry-dead QUEUE [JOB_ID ...]            dead jobs back to pending, fresh attempt budget
    echomq purge QUEUE {completed,dead} [--yes]     delete every completed (or dead) job of QUEUE
    echomq ping [--count N]                         server version, round trip, script cache
    echomq jobs QUEUE STATE [--task T] [--limit N]  a place's jobs (see job_cli.py)
    echomq workers                                  live workers and the jobs they run
    echomq tail [--queue Q] [--task T] [--since S]  job events live, from every worker
    echomq cancel|run-now|delete|retry JOB_ID       one job (retry: a dead one back to pending)
    echomq schedules [ACTION NAME]                  periodic schedules (see schedule_cli.py)

Every subcommand takes ``--json``: one JSON document on stdout, nothing else
(``tail``: one JSON object per line, per event).
Data is printed as data: nothing is read as rich markup or emoji codes, and
control characters (an ESC in an exception message) are shown escaped.
A bad queue name or job id, an unknown job, an unreachable server: a
``CommandError`` and a non-zero exit status. Bulk operations run as bounded
script calls (``--batch`` jobs each) and show a progress bar between them.
``retry-dead`` and ``purge`` act on the set as it was when they read it (see
bulk_cli.py). Ctrl-C exits with status 130 and a message, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Group, RenderableType
from rich.live import Live

from echomq_django import bulk_cli, conf, job_cli, outbox, schedule_cli, tail_cli
from echomq_django.cli_views import (
    DataConsole,
    job_errors,
    job_tracebacks,
    job_view,
    limits_view,
    ping_view,
    stats_view,
)
from echomq_django.engine import script
from echomq_django.engine.errors import EchoMQError, ServerUnavailable
from echomq_django.engine.jobs import SWEEP_LIMIT, SWEEP_MAX, QueueStats
from echomq_django.engine.keyspace import validate_job_id
from echomq_django.engine.limits import GateState
from echomq_django.engine.nodes import cached_scripts, primaries
from echomq_django.management import count_arg, printable, queue_arg, seconds_arg
from echomq_django.queue_totals import event_totals, known_queues, per_queue, queue_stats

PURGEABLE = ("completed", "dead")
PING_MAX = 1000  # round trips one `ping` times: a few seconds at most, never an hour


def _job_id_arg(value: str) -> str:
    """argparse type: a canonical job id (checked before any key is built)."""
    try:
        return validate_job_id(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# Operator actions on one job (the admin's buttons): subcommand -> help.
JOB_ACTIONS = {
    "cancel": "stop a job: at once if it waits, through its worker if it runs",
    "run-now": "a scheduled job (or a retry waiting out its backoff) to pending now",
    "delete": "remove a job and its row, whatever its state",
    "retry": "a dead job back to pending with a fresh attempt budget",
}


def _locate(jobs: Any, job_id: str, queue: str | None) -> Any:
    """The job's row, from ``queue`` or the first known queue holding it."""
    searched = [queue] if queue else known_queues(jobs)
    job = next((j for q in searched if (j := jobs.get(q, job_id)) is not None), None)
    if job is None:
        where = ", ".join(searched) or "(no queue known)"
        raise CommandError(f"job {job_id} is in none of the queues searched: {where}")
    return job


class Command(BaseCommand):
    help = (
        "Inspect and operate EchoMQ queues: stats, inspect, jobs, cancel, run-now, delete, retry, "
        "retry-dead, purge, ping, workers, tail, schedules."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        json_flag = CommandParser(add_help=False)
        json_flag.add_argument(
            "--json", dest="as_json", action="store_true", help="print one JSON document"
        )

        def add(name: str, help_text: str) -> argparse.ArgumentParser:
            # A CommandParser (Django's add_subparsers): bad values raise CommandError
            # under call_command, and exit 2 with usage from the command line.
            return sub.add_parser(name, help=help_text, parents=[json_flag])

        stats = add("stats", "jobs per queue and state, and the queues' event counters")
        stats.add_argument("queues", nargs="*", type=queue_arg, metavar="QUEUE")
        stats.add_argument(
            "--watch",
            nargs="?",
            const=2.0,
            type=seconds_arg,
            metavar="SECONDS",
            help="refresh every SECONDS (default 2) until Ctrl-C",
        )

        inspect = add("inspect", "one job's row, searched in the known queues")
        inspect.add_argument("job_id", type=_job_id_arg, metavar="JOB_ID")
        inspect.add_argument("--queue", type=queue_arg, help="look only in this queue")

        for name, what in JOB_ACTIONS.items():
            action = add(name, what)
            action.add_argument("job_id", type=_job_id_arg, metavar="JOB_ID")
            action.add_argument("--queue", type=queue_arg, help="look only in this queue")

        retry = add("retry-dead", "dead jobs back to pending with a fresh attempt budget")
        retry.add_argument("queue", type=queue_arg, metavar="QUEUE")
        retry.add_argument("job_ids", nargs="*", type=_job_id_arg, metavar="JOB_ID")
        retry.add_argument("--batch", type=count_arg(SWEEP_MAX), default=SWEEP_LIMIT)

        purge = add("purge", "delete every completed or dead job of a queue")
        purge.add_argument("queue", type=queue_arg, metavar="QUEUE")
        purge.add_argument("state", choices=PURGEABLE)
        purge.add_argument(
            "--yes",
            "--no-input",
            "--noinput",
            dest="interactive",
            action="store_false",
            help="do not ask for confirmation",
        )
        purge.add_argument("--batch", type=count_arg(SWEEP_MAX), default=SWEEP_LIMIT)

        ping = add("ping", "server version, round-trip latency, script cache")
        ping.add_argument(
            "--count", type=count_arg(PING_MAX), default=5, help=f"PINGs to time (most {PING_MAX})"
        )

        job_cli.add_jobs_arguments(add("jobs", "a queue's jobs in one state, filtered by task"))
        add("workers", "live workers, the jobs each runs and for how long")
        tail_cli.add_arguments(add("tail", "follow job events live, from every worker"))
        schedule_cli.add_arguments(
            add("schedules", "periodic schedules: list, run-now, pause, resume, remove NAME")
        )

    def handle(self, *args: Any, subcommand: str, **options: Any) -> None:
        self.stdout.ending = ""  # rich and the JSON writer end their own lines
        self.console = DataConsole(  # every string escaped, "[/]" or "[link=...]" no markup
            file=cast(TextIO, self.stdout),  # an OutputWrapper: a TextIO by delegation
            no_color=options["no_color"],
            force_terminal=options["force_color"] or None,
        )
        action = getattr(self, "do_" + subcommand.replace("-", "_"))
        try:
            action(**options)
        except ServerUnavailable as exc:
            url = conf.get_settings().safe_url
            raise CommandError(
                printable(f"cannot reach the EchoMQ server at {url}: {exc}")
            ) from exc
        except EchoMQError as exc:
            raise CommandError(printable(f"{type(exc).__name__}: {exc}")) from exc
        except KeyboardInterrupt:  # Ctrl-C: a message and status 130, never a traceback
            raise CommandError("interrupted", returncode=bulk_cli.INTERRUPTED) from None

    def emit_json(self, document: Any) -> None:
        self.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")

    # -- stats -------------------------------------------------------------------------

    def do_stats(self, queues: Sequence[str], watch: float | None, as_json: bool, **_: Any) -> None:
        if watch and as_json:
            raise CommandError("--watch draws a live table; it cannot be combined with --json")
        jobs = conf.get_jobs()

        def snapshot() -> tuple[list[QueueStats], dict[str, list[GateState]]]:
            # Known queues are read again on every refresh; a queue whose places or
            # limits cannot be read is named on stderr, and the others are shown.
            stats, unreadable = queue_stats(jobs, list(queues) or known_queues(jobs))
            limits, bad_limits = per_queue([s.queue for s in stats], jobs.limits)
            for queue, why in unreadable.items():
                self.stderr.write(f"cannot read queue {queue}: {why}")
            for queue, why in bad_limits.items():
                self.stderr.write(f"cannot read the limits of queue {queue}: {why}")
            return stats, limits

        def view() -> Group:  # the queues, their limits, the outbox backlog when a task uses one
            backlog = [outbox.backlog().describe()] if outbox.enabled() else []
            stats, limits = snapshot()
            return Group(stats_view(stats, watch), *limits_view(limits), *backlog)

        if as_json:
            # "events": the table's event columns (failed, ...), derived from "metrics"
            stats, limits = snapshot()
            self.emit_json(
                [
                    {
                        **dataclasses.asdict(s),
                        "events": event_totals(s),
                        "limits": [dataclasses.asdict(g) for g in limits.get(s.queue, [])],
                    }
                    for s in stats
                ]
            )
        elif watch:
            self.watch(view, watch)
        else:
            self.console.print(view())

    def watch(self, render: Callable[[], RenderableType], every: float) -> None:
        """Redraw until Ctrl-C; off a terminal, print one snapshot per tick instead."""
        try:
            if self.console.is_terminal:
                with Live(render(), console=self.console, auto_refresh=False) as live:
                    while True:
                        time.sleep(every)
                        live.update(render(), refresh=True)
            while True:
                self.console.print(render())
                time.sleep(every)
        except KeyboardInterrupt:
            return

    # -- inspect -----------------------------------------------------------------------

    def do_inspect(self, job_id: str, queue: str | None, as_json: bool, **_: Any) -> None:
        job = _locate(conf.get_jobs(), job_id, queue)
        if as_json:
            self.emit_json({**dataclasses.asdict(job), "errors": job_errors(job)})
        else:
            self.console.print(job_view(job))
            self.console.print(job_tracebacks(job), soft_wrap=True, end="")

    def do_cancel(self, job_id: str, queue: str | None, as_json: bool, **_: Any) -> None:
        jobs = conf.get_jobs()
        job = _locate(jobs, job_id, queue)
        outcome = jobs.cancel(job.queue, job_id, "cancelled from the command line")
        job_cli.record(job, "cancelled" if outcome == "dead" else "cancelling")
        said = {
            "dead": "cancelled: moved to dead (it can still be retried)",
            "cancelling": "running: its worker stops it within about a second and it is dead "
            "(unless its run completes first: a completed run stays completed)",
        }[outcome]
        self._report(job_id, job.queue, outcome, said, as_json)

    def do_run_now(self, job_id: str, queue: str | None, as_json: bool, **_: Any) -> None:
        jobs = conf.get_jobs()
        job = _locate(jobs, job_id, queue)
        jobs.run_now(job.queue, job_id)
        job_cli.record(job, "run_now")
        self._report(job_id, job.queue, "pending", "moved to pending: it runs next", as_json)

    def do_delete(self, job_id: str, queue: str | None, as_json: bool, **_: Any) -> None:
        jobs = conf.get_jobs()
        job = _locate(jobs, job_id, queue)
        was = jobs.delete(job.queue, job_id)
        job_cli.record(job, "deleted")
        self._report(job_id, job.queue, "deleted", f"deleted (it was {was})", as_json)

    def do_retry(self, job_id: str, queue: str | None, as_json: bool, **_: Any) -> None:
        job_cli.do_retry(self, _locate(conf.get_jobs(), job_id, queue), as_json)

    def do_jobs(
        self,
        queue: str,
        state: str,
        task: str | None,
        limit: int,
        oldest_first: bool,
        as_json: bool,
        **_: Any,
    ) -> None:
        job_cli.do_jobs(self, queue, state, task, limit, oldest_first, as_json)

    def _report(self, job_id: str, queue: str, outcome: str, said: str, as_json: bool) -> None:
        if as_json:
            self.emit_json({"id": job_id, "queue": queue, "outcome": outcome})
        else:
            self.console.print(f"job {job_id} ({queue}): {said}")

    # -- bulk operations (see bulk_cli.py) -----------------------------------------------

    def do_retry_dead(
        self, queue: str, job_ids: Sequence[str], batch: int, as_json: bool, **_: Any
    ) -> None:
        bulk_cli.retry_dead(self, queue, job_ids, batch, as_json)

    def do_purge(
        self, queue: str, state: str, interactive: bool, batch: int, as_json: bool, **_: Any
    ) -> None:
        bulk_cli.purge(self, queue, state, interactive, batch, as_json)

    # -- ping ----------------------------------------------------------------------------

    def do_ping(self, count: int, as_json: bool, **_: Any) -> None:
        connector = conf.get_connector()
        nodes = primaries(connector)
        server = nodes[0].info("server")
        rtts = []
        for _sample in range(count):
            start = time.perf_counter()
            connector.ping()
            rtts.append((time.perf_counter() - start) * 1000)
        scripts = script.all_scripts()
        cached = cached_scripts(connector, [s.sha for s in scripts])
        report = {
            "url": connector.safe_url,
            "product": server.get("server_name", "redis"),
            "version": server.get("valkey_version") or server.get("redis_version"),
            "mode": "cluster" if connector.is_cluster else "standalone",
            "primaries": len(nodes),
            "rtt_ms": {
                "min": round(min(rtts), 3),
                "median": round(statistics.median(rtts), 3),
                "max": round(max(rtts), 3),
                "samples": count,
            },
            "scripts": {s.name: bool(c) for s, c in zip(scripts, cached, strict=True)},
        }
        if as_json:
            self.emit_json(report)
        else:
            self.console.print(ping_view(report))

    # -- workers -------------------------------------------------------------------------

    def do_workers(self, as_json: bool, **_: Any) -> None:
        job_cli.do_workers(self, as_json)

    def do_tail(
        self,
        queues: Sequence[str] | None,
        tasks: Sequence[str] | None,
        since: float | None,
        as_json: bool,
        **_: Any,
    ) -> None:
        tail_cli.handle(self, queues, tasks, since, as_json)

    # -- schedules -----------------------------------------------------------------------

    def do_schedules(
        self, action: str, name: str | None, queue: str | None, as_json: bool, **_: Any
    ) -> None:
        schedule_cli.handle(self, action, name, queue, as_json)
