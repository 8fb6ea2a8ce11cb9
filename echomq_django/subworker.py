"""The Django side of a supervised child worker (``runworker --processes N``).

A child is a fresh interpreter: before it can run a task, Django must be set up in
it as in the command that started it (the settings module is in its environment),
with that command's logging. Nothing here is imported before ``django.setup()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from echomq_django.engine.jobs import Jobs
    from echomq_django.engine.outcome import Handler


def setup(verbosity: int) -> tuple[Jobs, Handler]:
    """``Supervisor(setup=...)``: Django set up, the process's jobs, ``execute`` the handler."""
    import django

    django.setup()

    from echomq_django import conf
    from echomq_django.execution import execute
    from echomq_django.management import setup_logging

    setup_logging(verbosity)
    return conf.get_jobs(), execute
