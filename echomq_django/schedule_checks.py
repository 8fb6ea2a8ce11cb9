"""System checks of ``ECHOMQ["SCHEDULES"]`` (run by every command that runs checks).

::

    echomq.E101  SCHEDULES is not a dict, an entry is not a dict, or has an unknown key
    echomq.E102  a schedule names no task, or something that is not a task the worker runs
    echomq.E103  a cron expression the parser refuses
    echomq.E104  a time zone that is not in the IANA database
    echomq.E105  any other bad value (every, grace, catch_up, overlap, queue, priority, args),
                 or a task whose idempotency key a periodic job cannot keep

``runreaper`` runs the checks first, so it never starts with a schedule it cannot fire.
"""

from __future__ import annotations

from typing import Any

from django.core import checks

from .engine.timing import InvalidCron, UnknownTimeZone
from .exceptions import MalformedSchedules, UnknownScheduleTask
from .schedules import problems

HINTS = {
    "echomq.E101": 'e.g. ECHOMQ["SCHEDULES"] = {"nightly": {"task": "app.tasks.nightly", '
    '"cron": "0 3 * * *"}}',
    "echomq.E102": "Name a function decorated with @task in an installed app's tasks module "
    "(or in a module of the backend's TASK_MODULES), by its dotted path.",
    "echomq.E103": "Five fields (minute hour day month weekday), or six with seconds first, "
    'e.g. "*/15 * * * *" or "0 3 * * mon-fri".',
    "echomq.E104": 'Use an IANA zone name, e.g. "Europe/Paris" or "UTC".',
    "echomq.E105": "See the Periodic jobs section of the README for each key's values.",
}


def check_id(problem: Exception) -> str:
    if isinstance(problem, UnknownScheduleTask):
        return "echomq.E102"
    if isinstance(problem, InvalidCron):
        return "echomq.E103"
    if isinstance(problem, UnknownTimeZone):
        return "echomq.E104"
    if isinstance(problem, MalformedSchedules):
        return "echomq.E101"
    return "echomq.E105"


@checks.register("echomq")
def check_schedules(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Every schedule builds: its task, its timing, its zone and its options."""
    found: list[checks.CheckMessage] = []
    for problem in problems():
        ident = check_id(problem)
        found.append(checks.Error(f"{str(problem).rstrip('.')}.", hint=HINTS[ident], id=ident))
    return found
