"""django-vtasks: its Valkey backend (Rust driver, django-vcache) and its ``runworker``."""

from __future__ import annotations

from typing import Any

from bench.adapters.django_tasks import DjangoTasksPeer

DEFAULT_CONCURRENCY = 20  # VTASKS_CONCURRENCY's default


class VTasksAdapter(DjangoTasksPeer):
    key = "vtasks"
    name = "django-vtasks"
    module = "django_vtasks"
    dists = ("django-vtasks", "django-vcache")
    command = ("runworker", "--backend", "vtasks", "--queue", "bench")
    variants = (1, DEFAULT_CONCURRENCY)  # --concurrency; the best median is reported
    bulk_api = "ValkeyTaskBackend.enqueue_many (one LPUSH of the batch)"
    notes = (
        "django-vtasks: `manage.py runworker --backend vtasks --queue bench --concurrency C` "
        f"(asyncio worker; C = 1 or {DEFAULT_CONCURRENCY}, its default, best reported), "
        "ValkeyTaskBackend on its own Rust client (django-vcache), tasks enqueued through "
        "`transaction.on_commit` (autocommit: at once) on an in-memory SQLite database.",
    )

    def _enqueue_bulk(self, b: int) -> None:
        self._backend.enqueue_many([(self._tasks.noop, (), {})] * b)

    def worker_options(self, variant: Any) -> list[str]:
        return ["--concurrency", str(variant or DEFAULT_CONCURRENCY)]

    def variant_label(self, variant: Any) -> str:
        return f"c={variant}"


ADAPTER = VTasksAdapter()
