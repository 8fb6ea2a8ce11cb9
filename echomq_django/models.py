"""The admin's permission anchor: an unmanaged model with no table.

Queues live on Redis/Valkey, not in the database. ``Queue`` exists so that the
admin lists "EchoMQ" on its index and so that access can be granted the normal
Django way (groups, users, ``has_perm``):

- ``echomq.view_queue``: see the dashboard, the lists and job details;
- ``echomq.change_queue``: retry dead jobs, run scheduled jobs now, cancel jobs;
- ``echomq.delete_queue``: delete jobs, purge a queue's completed or dead set.
"""

from __future__ import annotations

from django.db import models


class Queue(models.Model):
    """A named queue on the server (no rows: ``managed = False`` and never queried)."""

    class Meta:
        managed = False
        default_permissions = ("view", "change", "delete")
        verbose_name = "queue"
        verbose_name_plural = "queues"
