"""``manage.py runworker [QUEUE[:SLOTS] ...]``: run Django tasks from EchoMQ queues.

This command only adapts settings, arguments and signals; the work is done by
:class:`echomq_django.engine.worker.Worker` with ``execution.execute`` as handler.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from echomq_django.engine.bounds import DEFAULT_CRASH_BUDGET, MAX_CRASH_BUDGET
from echomq_django.engine.nodes import server_version
from echomq_django.engine.retry_policy import RetryPolicy
from echomq_django.engine.worker import SWITCH_INTERVAL_S, Supervisor, Worker
from echomq_django.execution import execute, finished_outside
from echomq_django.management import (
    configured_queues,
    connect,
    count_arg,
    log_server_warnings,
    on_stop_signals,
    queue_arg,
    seconds_arg,
    setup_logging,
    warn_unconfigured,
)

logger = logging.getLogger("echomq.runworker")


def queue_spec_arg(value: str) -> tuple[str, int | None]:
    """argparse type: ``QUEUE`` or ``QUEUE:SLOTS``, the slots reserved for that queue."""
    name, colon, size = value.partition(":")
    name = queue_arg(name)
    if not colon:
        return name, None
    if not (size.isascii() and size.isdigit()) or int(size) < 1:
        raise argparse.ArgumentTypeError(
            f"{value!r}: give a queue's slots as QUEUE:N, N a whole number of at least 1"
        )
    return name, int(size)


def worker_shape(
    specs: list[tuple[str, int | None]], concurrency: int | None, processes: int
) -> tuple[list[str], dict[str, int], int]:
    """The queues, their sizes and the concurrency (per process) the arguments ask for.

    Without sizes, --concurrency defaults to 1 as it always has. With every queue
    sized it defaults to their sum (split over --processes, which must divide it);
    with some unsized it must be given, and they share what the sized ones leave.
    """
    queues = [name for name, _ in specs] or ["default"]
    sizes = {name: size for name, size in specs if size is not None}
    if sizes:
        twice = sorted({q for q in queues if queues.count(q) > 1})
        if twice:
            raise CommandError(f"queue(s) named twice: {', '.join(twice)}")
    if concurrency is not None:
        return queues, sizes, concurrency
    if not sizes:
        return queues, sizes, 1
    if len(sizes) < len(queues):
        unsized = ", ".join(q for q in queues if q not in sizes)
        raise CommandError(
            f"give --concurrency: the unsized queue(s) {unsized} share the slots it leaves "
            f"beyond the {sum(sizes.values())} the sized ones take"
        )
    total, per = sum(sizes.values()), max(processes, 1)
    if total % per:
        raise CommandError(
            f"the queue sizes add up to {total} slots, which {per} processes cannot share "
            f"evenly (each child runs the same number): make them add up to a multiple of {per}"
        )
    return queues, sizes, total // per


class Command(BaseCommand):
    help = (
        "Run an EchoMQ worker: lease jobs from the given queues (default: 'default'), run "
        "them as Django tasks, and complete or retry them. The first queue has precedence. "
        "SIGTERM or SIGINT stops it gracefully (running jobs get --grace seconds to finish, "
        "the rest go back to pending); a second signal exits at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "queues",
            nargs="*",
            metavar="QUEUE[:SLOTS]",
            type=queue_spec_arg,
            help="Queues to serve, in order of precedence (default: default). QUEUE:SLOTS "
            "reserves that many of the worker's slots for the queue: at most SLOTS of its "
            "jobs run at once, and its jobs never wait for another queue's (e.g. "
            "'default:4 slow:1'). Unsized queues share the slots the sized ones leave; "
            "without sizes all queues share every slot.",
        )
        parser.add_argument(
            "-c",
            "--concurrency",
            type=count_arg(),
            metavar="N",
            help="Jobs run at once, each in its own thread (default: 1, or with every queue "
            "sized the sum of their slots); with --processes, per child process. With some "
            "queues sized and some not, give it: the unsized share what the sized leave.",
        )
        parser.add_argument(
            "--processes",
            type=int,
            default=0,
            metavar="N",
            help="Run tasks in N child processes (each running --concurrency jobs at once) "
            "under this one, which keeps the leases: a task holding the GIL or crashing "
            "its process cannot starve the heartbeat or take the worker down, a time limit "
            "kills the child, and N cores are used. Default 0: tasks run in threads of "
            "this process (quickest to start; a time limit can only raise in the task).",
        )
        parser.add_argument(
            "--time-limit",
            type=float,
            default=0.0,
            metavar="SECONDS",
            help="Stop any task running longer than this (a task's own timeout may be "
            "shorter): TimeLimitExceeded is raised in it, and if it does not end within "
            "2 s its child is killed (process mode) or its thread abandoned (thread mode). "
            "The attempt fails and is retried or not per the task. Default 0: no cap.",
        )
        parser.add_argument(
            "--crash-budget",
            type=count_arg(MAX_CRASH_BUDGET),
            default=DEFAULT_CRASH_BUDGET,
            metavar="N",
            help="Crashes of its own process a job may cause before it is dead as "
            f"WorkerCrashed (default: {DEFAULT_CRASH_BUDGET}).",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Exit (status 0) once no job is ready and none is running. Jobs deferred "
            "to a future time do not keep the worker alive.",
        )
        parser.add_argument(
            "--max-jobs",
            type=count_arg(),
            metavar="N",
            help="Exit (status 0) after running N jobs (e.g. to bound memory growth).",
        )
        parser.add_argument(
            "--lease",
            type=seconds_arg,
            default=30.0,
            metavar="SECONDS",
            help="Lease of a job whose task sets none (default: 30). A heartbeat renews "
            "the lease of running jobs, so a job may run longer; if the worker dies, "
            "the reaper returns its jobs once their lease expires.",
        )
        parser.add_argument(
            "--name",
            metavar="NAME",
            help="Worker id recorded in each job it runs and in the worker registry "
            "(default: host:pid:random). Printable ASCII without spaces or quotes.",
        )
        parser.add_argument(
            "--grace",
            type=float,
            default=30.0,
            metavar="SECONDS",
            help="On SIGTERM/SIGINT, how long running jobs may take to finish (default: 30). "
            "After it, process mode kills their children and releases the jobs; thread "
            "mode exits and leaves them to the reaper (a thread cannot be killed, and a "
            "job released while it still runs could start elsewhere beside it).",
        )
        parser.add_argument(
            "--retry-base",
            type=float,
            default=1.0,
            metavar="SECONDS",
            help="Backoff after a job's first failure, doubled on each further one, with "
            "jitter, unless the task sets its own (default: 1).",
        )
        parser.add_argument(
            "--retry-max",
            type=float,
            default=600.0,
            metavar="SECONDS",
            help="Upper bound of the retry backoff (default: 600).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        setup_logging(options["verbosity"])
        queues, sizes, concurrency = worker_shape(
            options["queues"], options["concurrency"], options["processes"]
        )
        jobs = connect()
        settings: dict[str, Any] = dict(
            sizes=sizes,
            concurrency=concurrency,
            lease_ms=round(options["lease"] * 1000),
            name=options["name"],
            burst=options["burst"],
            max_jobs=options["max_jobs"],
            grace_s=options["grace"],
            time_limit_s=options["time_limit"],
            crash_budget=options["crash_budget"],
            retry_policy=RetryPolicy(
                base_ms=round(options["retry_base"] * 1000),
                max_ms=round(options["retry_max"] * 1000),
            ),
        )
        worker: Worker | Supervisor
        try:
            if options["processes"]:
                worker = Supervisor(
                    jobs, queues, processes=options["processes"], setup="echomq_django.subworker:setup",
                    setup_args={"verbosity": options["verbosity"]},
                    ended_outside=finished_outside, **settings,
                )  # fmt: skip
            else:
                worker = Worker(
                    jobs, queues, execute, child_handler="echomq_django.execution:execute",
                    child_initializer="django:setup", ended_outside=finished_outside, **settings,
                )  # fmt: skip
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        waits = f"no new job is taken, running ones get up to {options['grace']:g}s to finish"
        on_stop_signals(worker.stop, logger, waits)  # first: a signal during start-up stops cleanly
        logger.info(
            "worker %s on %s (%s): queues %s, %s, lease %gs%s",
            worker.id,
            jobs.connector.safe_url,
            server_version(jobs.connector),
            ", ".join(f"{q}:{sizes[q]}" if q in sizes else q for q in worker.queues),
            f"{worker.config.processes} processes x {worker.concurrency} threads"
            if worker.config.processes
            else f"concurrency {worker.concurrency}",
            worker.lease_ms / 1000,
            ", burst" if worker.burst else "",
        )
        unserved = [q for q in configured_queues() if q not in worker.queues]
        if unserved:
            logger.info(
                "not serving the configured queues %s (name them to serve them)",
                ", ".join(unserved),
            )
        warn_unconfigured(worker.queues, logger)
        log_server_warnings(jobs.connector, logger)
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        worker.run()
        if worker.fatal:  # a supervisor with restart-on-failure must see it
            raise CommandError(f"worker {worker.id} stopped itself: {worker.fatal}", returncode=1)
