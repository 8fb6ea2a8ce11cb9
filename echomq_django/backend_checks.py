"""What is wrong with one ``TASKS`` entry of the EchoMQ backend, as system-check errors.

The backend reports them from ``check()`` and raises the first on enqueue: a bad entry
must not crash the import of a tasks module, nor ``manage.py check`` itself.

    echomq.E004  OPTIONS is not a dict, or has a key the backend does not know
    echomq.E005  QUEUES is not a list, or a name in it cannot be a queue name
    echomq.E006  an OPTIONS value is bad (ENQUEUE_ON_COMMIT, TASK_MODULES, a job
                 option, RATE_LIMITS)
"""

from __future__ import annotations

from collections.abc import Mapping

from django.core import checks

from . import conf
from .checks import queue_messages
from .flow import queue_rate_limits
from .options import JOB_OPTIONS, JobOptions

OTHER_OPTIONS = ("ENQUEUE_ON_COMMIT", "TASK_MODULES", "RATE_LIMITS")
# Every key TASKS OPTIONS may hold: others are the system check error echomq.E004.
KNOWN_OPTIONS = frozenset({o.upper() for o in JOB_OPTIONS} | set(OTHER_OPTIONS))


def configuration_problems(
    alias: str, options: object, queues: object
) -> list[checks.CheckMessage]:
    """The errors of ``settings.TASKS[alias]`` (its OPTIONS and QUEUES, as written); []
    when none."""
    where = f"settings.TASKS[{alias!r}]"
    if not isinstance(options, Mapping):
        return [
            checks.Error(
                f"{where}['OPTIONS'] must be a dict, not {type(options).__name__}.",
                hint='e.g. "OPTIONS": {"MAX_ATTEMPTS": 3}',
                id="echomq.E004",
            )
        ]
    unknown = sorted(set(options) - KNOWN_OPTIONS, key=str)
    if unknown:
        return [
            checks.Error(
                f"{where}['OPTIONS'] has unknown options: {', '.join(map(repr, unknown))}.",
                hint=f"Options of the EchoMQ backend: {', '.join(sorted(KNOWN_OPTIONS))}.",
                id="echomq.E004",
            )
        ]
    problems = queue_messages(queues, f"{where}['QUEUES']")
    if problem := conf.enqueue_on_commit_problem(options.get("ENQUEUE_ON_COMMIT", False)):
        problems.append(checks.Error(f"{where}['OPTIONS']: {problem}.", id="echomq.E006"))
    if problem := conf.task_modules_problem(options.get("TASK_MODULES", [])):
        problems.append(checks.Error(f"{where}['OPTIONS']: {problem}.", id="echomq.E006"))
    try:
        JobOptions.parse({name: options.get(name.upper()) for name in JOB_OPTIONS})
    except ValueError as exc:
        problems.append(
            checks.Error(
                f"{where}['OPTIONS']: {exc}.",
                hint="Durations are seconds (or timedelta); BACKOFF may also be a callable "
                "(exception, task_result) -> seconds | None; MAX_ATTEMPTS is at least 1.",
                id="echomq.E006",
            )
        )
    try:
        queue_rate_limits(options.get("RATE_LIMITS"))
    except ValueError as exc:
        problems.append(checks.Error(f"{where}['OPTIONS']: {exc}.", id="echomq.E006"))
    return problems


__all__ = ["KNOWN_OPTIONS", "configuration_problems"]
