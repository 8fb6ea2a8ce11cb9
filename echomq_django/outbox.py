"""The enqueue outbox: a job that commits (or rolls back) with the caller's own rows.

``OPTIONS["ENQUEUE_ON_COMMIT"] = "outbox"`` (or ``@task(enqueue_on_commit="outbox")``):
inside ``atomic()`` an enqueue writes the prepared job, id and every option, to the
``echomq_outbox`` table through the ORM, in the caller's transaction. A rollback
leaves nothing anywhere; a commit makes the job durable even when the queue server
is down, or the process dies one instruction later. The relay
(``echomq_django.relay``, run by ``runreaper``) then sends committed rows with the
engine's enqueue script and deletes them. Outside a transaction the job is sent at
once, as with ``ENQUEUE_ON_COMMIT = True``.

This module is the model side: the write, the lookups of a job still waiting
(``get_result`` answers READY), and the backlog the admin, Prometheus and
``echomq stats`` show. The outbox lives in the database the router picks for
``OutboxJob`` ("default" unless routed): the enqueue is transactional with that
database's transaction.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.core.signals import setting_changed
from django.db import connections, router, transaction
from django.dispatch import receiver
from django.utils import timezone

from . import conf
from .compat import AnyTask, AnyTaskResult, Task, task_backends, task_enqueued
from .engine.errors import CorruptRow
from .engine.jobs import Job, NewJob
from .engine.json_text import read_json

if TYPE_CHECKING:
    from .models import OutboxJob

logger = logging.getLogger("echomq.enqueue")

OUTBOX = "outbox"
COMMIT_MODES = conf.ENQUEUE_ON_COMMIT_VALUES  # the values ENQUEUE_ON_COMMIT may take
# The backlog is counted up to this many rows (a bounded COUNT): past it, "at least".
COUNT_CAP = 1_000_000
# NewJob's fields kept in OutboxJob.options (id and payload have their own columns).
OPTION_FIELDS = tuple(f.name for f in fields(NewJob) if f.name not in ("id", "payload"))


def commit_mode(value: object) -> bool | str:
    """An ENQUEUE_ON_COMMIT value as the backend uses it: ``"outbox"``, or on/off."""
    return OUTBOX if value == OUTBOX else bool(value)


def model() -> type[OutboxJob]:
    """The outbox model, imported on first use: ``backends.py`` imports this module, and
    processes without the app registry (the engine's own workers) import ``backends.py``."""
    from .models import OutboxJob

    return OutboxJob


def database() -> str:
    """The alias of the database that holds the outbox (the router's choice)."""
    return router.db_for_write(model())


def transaction_database() -> str | None:
    """The database whose commit an on-commit enqueue waits for: the outbox's when it
    is in ``atomic()``, else the first of the others that is (a view whose transaction
    runs on another database: its rollback must drop the job too), else None (the job
    is sent at once)."""
    first = database()
    for alias in (first, *(a for a in connections if a != first)):
        if transaction.get_connection(alias).in_atomic_block:
            return alias
    return None


def in_transaction() -> bool:
    """True inside ``atomic()`` on the outbox's database: an enqueue goes to the outbox."""
    in_atomic: bool = transaction.get_connection(database()).in_atomic_block
    return in_atomic


# -- the write ----------------------------------------------------------------------------


def to_row(queue: str, backend: str, job: NewJob) -> OutboxJob:
    options = {name: getattr(job, name) for name in OPTION_FIELDS}
    return model()(
        id=job.id, queue=queue, backend=backend, payload=job.payload, options=json.dumps(options)
    )


def to_new_job(row: OutboxJob) -> NewJob:
    """The job as it was prepared; ``ValueError``/``TypeError`` for a row that cannot be one."""
    options = read_json(row.options)
    if not isinstance(options, dict):
        raise ValueError("the row's options are not a JSON object")
    return NewJob(id=row.id, payload=row.payload, **options)


def write(sender: type, prepared: Sequence[tuple[NewJob, AnyTaskResult]]) -> list[AnyTaskResult]:
    """Store the prepared jobs in the outbox, in the current transaction (one INSERT).

    Each job is validated first, as the engine would at enqueue: a bad one fails this
    call and writes nothing. ``task_enqueued`` fires for each job when the transaction
    commits (the job is then durable); ``enqueued_at`` stays None until the relay has
    sent it (``get_result`` then shows the server's).
    """
    max_payload = conf.get_jobs().max_payload
    rows = []
    for job, result in prepared:
        job.validate(max_payload)
        rows.append(to_row(result.task.queue_name, result.backend, job))
    using = database()
    model().objects.using(using).bulk_create(rows)
    results = [result for _, result in prepared]
    transaction.on_commit(functools.partial(announce, sender, results), using=using)
    return results


def announce(sender: type, results: Iterable[AnyTaskResult]) -> None:
    """``task_enqueued`` for each job stored; a failing receiver is logged, never raised.

    Every job is stored already. One receiver's error must not keep the signal from
    the other receivers and jobs, nor hand the caller an error for jobs that were
    stored (a retry would store them twice); sent from an on-commit callback, it
    would stop Django from running the transaction's later callbacks, and the jobs
    they send would never be stored. As ``task_finished`` on a worker. (Errors of
    the store itself, such as an unreachable server, still raise.)
    """
    for result in results:
        for called, response in task_enqueued.send_robust(sender, task_result=result):
            if isinstance(response, Exception):
                logger.error(
                    "a task_enqueued receiver (%s) failed for task %s",
                    getattr(called, "__qualname__", called),
                    result.id,
                    exc_info=response,
                )


# -- reads ----------------------------------------------------------------------------------


def waiting_job(job_id: str, backend: str) -> Job | None:
    """The job ``job_id`` of ``backend`` as a pending row, while it waits in the outbox.

    None when it is not there (never written, rolled back, or already relayed);
    ``CorruptRow`` when it cannot be a job (the relay keeps it, refused). The
    backend asks only when ``enabled()`` or ``table_ready()``: a worker process need
    not have a database.
    """
    row = model().objects.using(database()).filter(pk=job_id, backend=backend).first()
    if row is None:
        return None
    try:
        job = to_new_job(row)
    except (ValueError, TypeError) as exc:  # planted: typed, as a server row that cannot be one
        raise CorruptRow(f"the outbox row of job {job_id} cannot be a job: {exc}") from None
    return Job(
        queue=row.queue,
        id=job.id,
        state="pending",  # READY, as it will be on the server (scheduled is READY too)
        payload=job.payload,
        task=job.task,
        priority=job.priority,
        attempts=0,
        refunds=0,
        max_attempts=job.max_attempts,
        lease_ms=job.lease_ms,
        enqueued_at=None,
        started_at=None,
        last_attempted_at=None,
        finished_at=None,
        due_ms=job.due_ms or None,
        lease_deadline=None,
        run_after=job.run_after,
        worker="",
        worker_ids=(),
        errors="",
        last_error="",
        result=None,
        result_ttl_ms=job.result_ttl_ms,
        idempotency_key="",
    )


@dataclass(frozen=True, slots=True)
class Backlog:
    """Rows waiting for the relay, and how long the oldest has waited."""

    jobs: int  # at most COUNT_CAP (then ``capped``)
    oldest_age_s: float | None  # None when empty
    refused: int  # rows the server refused at least once (see their last_error)

    @property
    def capped(self) -> bool:
        return self.jobs >= COUNT_CAP

    def describe(self) -> str:
        if not self.jobs:
            return "outbox: empty"
        text = f"outbox: {self.jobs}{'+' if self.capped else ''} job(s) waiting for the relay"
        if self.oldest_age_s is not None:
            text += f", the oldest for {self.oldest_age_s:.1f}s"
        if self.refused:
            text += f"; {self.refused} refused by the server (see their last_error)"
        return text


def backlog(now: datetime | None = None) -> Backlog:
    """The outbox's backlog: a bounded count and the oldest row (first by its UUIDv7 id)."""
    rows = model().objects.using(database())
    jobs = rows.order_by()[:COUNT_CAP].count()
    if not jobs:
        return Backlog(0, None, 0)
    oldest = rows.order_by("id").values_list("created_at", flat=True).first()
    age = None if oldest is None else ((now or timezone.now()) - oldest).total_seconds()
    refused = rows.filter(attempts__gt=0).order_by()[:COUNT_CAP].count()
    return Backlog(jobs, max(0.0, age) if age is not None else None, refused)


# -- is the outbox in use? --------------------------------------------------------------


@functools.cache
def enabled() -> bool:
    """True when a backend's ENQUEUE_ON_COMMIT, or a loaded task's, is ``"outbox"``.

    What decides whether ``runreaper`` relays, ``get_result`` looks in the outbox,
    the system check wants the table, and the admin shows the backlog. Recomputed
    when TASKS or INSTALLED_APPS change.
    """
    from .backends import EchoMQBackend  # the backend imports this module

    backends = [b for b in task_backends.all() if isinstance(b, EchoMQBackend)]
    if any(b.enqueue_on_commit == OUTBOX for b in backends):
        return True
    return any(
        getattr(task, "enqueue_on_commit", None) == OUTBOX
        for task in loaded_tasks(m for b in backends for m in b.task_modules)
    )


def table_ready() -> bool:
    """The outbox table exists in its database (it was migrated).

    ``enabled()`` sees the tasks it can load (the apps' ``tasks`` modules and
    TASK_MODULES); a task elsewhere in an app (``myapp.jobs``) may still write to the
    outbox. Its rows must not wait for ever, nor ``get_result`` deny them: where the
    table exists, ``runreaper`` relays (slowly while no known task uses it) and
    ``get_result`` looks there. An answer is kept once the database gave one.
    """
    try:
        return _table_exists()
    except Exception:  # no database here (a worker may have none), or none yet: asked again
        return False


@functools.cache
def _table_exists() -> bool:
    """The database's answer (a failure raises, and is not kept)."""
    return model()._meta.db_table in connections[database()].introspection.table_names()


def loaded_tasks(modules: Iterable[str]) -> list[AnyTask]:
    """The Task objects of every app's ``tasks`` module and of ``modules`` (imported once)."""
    from .discovery import discover_tasks

    modules = tuple(modules)
    # A task module that cannot import here (e.g. a queue these settings lack) enqueues
    # nothing either: look at the tasks that did load.
    with contextlib.suppress(Exception):
        discover_tasks(modules)
    names = [f"{app.name}.tasks" for app in apps.get_app_configs()] + list(modules)
    found: list[AnyTask] = []
    for name in dict.fromkeys(names):
        module = sys.modules.get(name)
        if module is not None:
            found += [v for v in vars(module).values() if isinstance(v, Task)]
    return found


@receiver(setting_changed)
def _settings_changed(setting: str, **kwargs: Any) -> None:
    if setting in ("TASKS", "INSTALLED_APPS", "DATABASES"):
        enabled.cache_clear()
        _table_exists.cache_clear()


__all__ = [
    "COMMIT_MODES",
    "OUTBOX",
    "Backlog",
    "announce",
    "backlog",
    "commit_mode",
    "enabled",
    "in_transaction",
    "table_ready",
    "waiting_job",
    "write",
]
