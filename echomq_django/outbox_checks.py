"""The system check of the enqueue outbox (registered from ``apps.py``).

::

    echomq.W020  a task enqueues through the outbox, but its table is missing
                 (migrate not run): enqueue inside atomic() would fail
    echomq.W021  the outbox's database could not be asked whether the table exists

Warnings, not errors: ``migrate``, the command that creates the table, runs the
system checks first and would refuse to start on an error.
"""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import Error as DatabaseError
from django.db import connections

from . import outbox
from .models import OutboxJob


@checks.register("echomq")
def check_outbox_table(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """When some task uses ``ENQUEUE_ON_COMMIT = "outbox"``, its table exists."""
    if not outbox.enabled():
        return []
    alias = outbox.database()
    table = OutboxJob._meta.db_table
    try:
        with connections[alias].cursor() as cursor:
            tables = connections[alias].introspection.table_names(cursor)
    except DatabaseError as exc:
        return [
            checks.Warning(
                f"Could not check that the EchoMQ outbox table {table!r} exists in the "
                f"database {alias!r}: {exc}",
                hint="Make sure `manage.py migrate echomq` has run on that database.",
                id="echomq.W021",
            )
        ]
    if table in tables:
        return []
    return [
        checks.Warning(
            f"ENQUEUE_ON_COMMIT is 'outbox' but the table {table!r} does not exist in the "
            f"database {alias!r}: every enqueue inside atomic() will fail.",
            hint="Run `manage.py migrate echomq`.",
            id="echomq.W020",
        )
    ]
