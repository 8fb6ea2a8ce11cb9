"""Tasks the schedule tests declare: one with every option an enqueue stores."""

from __future__ import annotations

from datetime import timedelta

from echomq_django.compat import task


@task(
    priority=4, queue_name="emails", max_attempts=6, lease=7, timeout=1, result_ttl=120,
    dead_ttl=timedelta(hours=1), rate_limit="10/s", concurrency=2,
    concurrency_key=lambda n: f"customer-{n}",
)  # fmt: skip
def every_option(n):
    return n


@task(idempotency_key="one-at-a-time")
def keyed():
    return None


@task(idempotency_key="window", unique_for=60)
def throttled():
    return None
