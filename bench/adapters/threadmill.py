"""threadmill: its Redis backend and ``manage.py threadmill worker`` (a supervisor + children)."""

from __future__ import annotations

from typing import Any

from bench.adapters.django_tasks import DjangoTasksPeer


class ThreadmillAdapter(DjangoTasksPeer):
    key = "threadmill"
    name = "threadmill"
    module = "threadmill"
    dists = ("threadmill",)
    command = ("threadmill", "worker", "-b", "threadmill", "-q", "bench")
    variants = (1, 4)  # --threads per child process; the best median is reported
    bulk_api = ""  # none: no enqueue_many
    notes = (
        "threadmill: `manage.py threadmill worker -b threadmill -q bench -w 1 -t T` per worker "
        "process (a supervisor and one child process; T = 1, its default, or 4 threads, best "
        "reported); no bulk API; the supervised row is one command with `-w 2`.",
    )

    def worker_options(self, variant: Any) -> list[str]:
        return ["-w", "1", "-t", str(variant or 1)]

    def variant_label(self, variant: Any) -> str:
        return f"t={variant}"

    def supervisor_argv(self, children: int, variant: Any = None) -> list[str]:
        return self.command_argv("-w", str(children), "-t", str(variant or 1))


ADAPTER = ThreadmillAdapter()
