"""Tasks of the outbox tests (loaded by workers through TASK_MODULES)."""

from __future__ import annotations

from echomq_django.compat import task


@task(priority=7, max_attempts=4, lease=12, result_ttl=3600)
def add(a, b):
    return a + b


@task(enqueue_on_commit="outbox")
def own_choice(n):
    """Through the outbox whatever the backend's ENQUEUE_ON_COMMIT says."""
    return n
