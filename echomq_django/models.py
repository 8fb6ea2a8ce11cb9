"""The admin's permission anchor (``Queue``, no table) and the enqueue outbox (``OutboxJob``).

Queues live on Redis/Valkey, not in the database. ``Queue`` exists so that the
admin lists "EchoMQ" on its index and so that access can be granted the normal
Django way (groups, users, ``has_perm``):

- ``echomq.view_queue``: see the dashboard, the lists and job details;
- ``echomq.change_queue``: retry dead jobs, run scheduled jobs now, cancel jobs;
- ``echomq.delete_queue``: delete jobs, purge a queue's completed or dead set.
"""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.utils import timezone


class Queue(models.Model):
    """A named queue on the server (no rows: ``managed = False`` and never queried)."""

    class Meta:
        managed = False
        default_permissions = ("view", "change", "delete")
        verbose_name = "queue"
        verbose_name_plural = "queues"


class OutboxJob(models.Model):
    """A job written in the caller's transaction, waiting for the relay to send it.

    ``ENQUEUE_ON_COMMIT = "outbox"``: inside ``atomic()`` an enqueue is one INSERT here,
    so the job commits (or rolls back) with the caller's own rows; the relay
    (``echomq_django.relay``) sends committed rows with the engine's enqueue script and
    deletes them. The row keeps everything the engine's ``NewJob`` needs: the job id
    (re-sending it is refused as "exists", which makes a relay crash harmless), the
    payload, and the other fields as JSON (``options``).

    The fields' types are written out (set type, get type) because the check runs
    django-stubs without its mypy plugin (pyproject [tool.mypy] says why).
    """

    # The job id (UUIDv7: time-ordered).
    id: models.CharField[str, str] = models.CharField(primary_key=True, max_length=36)
    queue: models.CharField[str, str] = models.CharField(max_length=100)
    # The TASKS alias, for get_result.
    backend: models.CharField[str, str] = models.CharField(max_length=100)
    payload: models.TextField[str, str] = models.TextField()
    # NewJob's fields besides id and payload, as a JSON object.
    options: models.TextField[str, str] = models.TextField()
    created_at: models.DateTimeField[datetime, datetime] = models.DateTimeField(
        default=timezone.now
    )
    # When a relay may take the row: the commit for a new row; a lease (SQLite) or a
    # back-off after a refusal pushes it later.
    available_at: models.DateTimeField[datetime, datetime] = models.DateTimeField(
        default=timezone.now
    )
    # The leasing relay's token.
    lease: models.CharField[str, str] = models.CharField(max_length=32, blank=True, default="")
    # Sends the server refused.
    attempts: models.PositiveIntegerField[int, int] = models.PositiveIntegerField(default=0)
    last_error: models.TextField[str, str] = models.TextField(blank=True, default="")

    class Meta:
        db_table = "echomq_outbox"
        verbose_name = "outbox job"
        # The relay's one query: the first N rows by (available_at, id) up to now, an
        # index range scan however many rows wait. The oldest row is the first by id.
        indexes = [models.Index(fields=["available_at", "id"], name="echomq_outbox_available")]

    def __str__(self) -> str:
        return f"{self.queue}/{self.id}"
