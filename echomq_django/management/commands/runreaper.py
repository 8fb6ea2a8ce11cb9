"""``manage.py runreaper [QUEUE ...]``: return expired leases, promote due jobs, trim retention,
fire periodic schedules (``ECHOMQ["SCHEDULES"]``, stored on the server when it starts).

This command only adapts settings, arguments and signals; the sweeps are
:class:`echomq_django.engine.reaper.Reaper`'s.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from echomq_django import schedules
from echomq_django.engine.bounds import DEFAULT_CRASH_BUDGET, MAX_CRASH_BUDGET
from echomq_django.engine.errors import InvalidJobOptions, InvalidSchedule, ServerUnavailable
from echomq_django.engine.nodes import server_version
from echomq_django.engine.reaper import Reaper
from echomq_django.execution import finished_outside
from echomq_django.management import (
    configured_queues,
    connect,
    count_arg,
    log_server_warnings,
    on_stop_signals,
    queue_arg,
    seconds_arg,
    setup_logging,
)
from echomq_django.relay import relay_for

logger = logging.getLogger("echomq.runreaper")


class Command(BaseCommand):
    help = (
        "Run the EchoMQ reaper: on every tick, per queue, return jobs whose lease expired "
        "to pending (or to dead once a job has crashed its worker --crash-budget times, or "
        "was cancelled), move due scheduled jobs to "
        "pending, and drop completed and dead jobs past their retention. Each step is a "
        "loop of bounded script calls. It also fires the periodic schedules of "
        "ECHOMQ['SCHEDULES'] (stored on the server at start) when they are due. Several "
        "reapers may run at once: each tick of a schedule is one job."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "queues",
            nargs="*",
            metavar="QUEUE",
            type=queue_arg,
            help="Sweep only these queues. Default: the queues of settings.ECHOMQ['QUEUES'], "
            "of the EchoMQ TASKS backends' QUEUES, and every queue that holds jobs.",
        )
        parser.add_argument(
            "--interval",
            type=seconds_arg,
            default=1.0,
            metavar="SECONDS",
            help="Seconds between ticks (default: 1).",
        )
        parser.add_argument(
            "--crash-budget",
            type=count_arg(MAX_CRASH_BUDGET),
            default=DEFAULT_CRASH_BUDGET,
            metavar="N",
            help="Crashes a job may cause, running alone on a worker that then died, before "
            f"it goes to dead as WorkerCrashed (default: {DEFAULT_CRASH_BUDGET}). Jobs that "
            "were only waiting, or running beside others, are never charged.",
        )
        parser.add_argument(
            "--once",
            action="store_true",
            help="Run one tick and exit (status 0; non-zero if the server is unreachable).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        setup_logging(options["verbosity"])
        jobs = connect()
        explicit = options["queues"]
        try:
            declared = schedules.declared()
        except InvalidSchedule as exc:  # the system checks say so first, unless skipped
            raise CommandError(str(exc)) from exc
        try:
            reaper = Reaper(
                jobs,
                explicit or configured_queues(),
                discover=not explicit,
                interval_s=options["interval"],
                crash_budget=options["crash_budget"],
                schedules=declared,
                ended_outside=finished_outside,
            )
        except InvalidJobOptions as exc:  # a bound the parser does not know (the most)
            raise CommandError(str(exc)) from exc
        relay = relay_for(jobs)  # the outbox relay, when a task enqueues through the outbox
        if options["once"]:
            try:
                reaper.run(once=True)
                if relay:
                    relay.drain()
            except ServerUnavailable as exc:
                raise CommandError(f"the server is unreachable: {exc}") from exc
            return

        # First: a signal during start-up stops cleanly.
        def stop() -> None:
            reaper.stop()
            if relay:
                relay.stop()

        on_stop_signals(stop, logger)
        logger.info(
            "reaper on %s (%s): %s, every %gs; %d schedule(s) declared",
            jobs.connector.safe_url,
            server_version(jobs.connector),
            ", ".join(reaper.queues) if explicit else "configured and discovered queues",
            reaper.interval_s,
            len(declared),
        )
        log_server_warnings(jobs.connector, logger)
        relaying = relay.start() if relay else None
        reaper.run()
        if relaying:
            relaying.join()
