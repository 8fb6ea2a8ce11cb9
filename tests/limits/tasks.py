"""Tasks with flow-control options, for the Django-side tests."""

from __future__ import annotations

from datetime import timedelta

from echomq_django.compat import task


@task(unique_for=timedelta(seconds=30))
def sync_once(customer_id: int) -> int:
    return customer_id


@task(debounce=timedelta(seconds=30))
def reindex(doc: str) -> str:
    return doc


@task(rate_limit="5/s burst 2", concurrency=1, concurrency_key=lambda customer_id: customer_id)
def call_api(customer_id: int) -> int:
    return customer_id
