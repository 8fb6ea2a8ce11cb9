"""What the Django Tasks adapters share: one Django set-up, ``enqueue``/``aenqueue`` loops.

Every Django Tasks backend is measured through the path a user gets: the same
``@task`` (bench/tasks/<key>_tasks.py), ``task.enqueue()`` one by one,
``await task.aenqueue()`` one by one from a running event loop (what an async
view does; Django's default ``aenqueue`` hops to a thread with ``sync_to_async``,
a backend may have its own), the backend's bulk call where it has one, and the
backend's own worker command.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import time
from typing import Any

from bench.adapters.base import PythonPeer, dist_version
from bench.common import python_exe

HARNESS_SETTINGS = "bench.djsettings.harness"


def django_setup() -> None:
    """Set Django up once in the harness process, with every backend's alias."""
    import django
    from django.conf import settings

    if not settings.configured:
        os.environ["DJANGO_SETTINGS_MODULE"] = HARNESS_SETTINGS
    django.setup()


def aenqueue_loop(task: Any, n: int) -> float:
    """Seconds for ``n`` sequential ``await task.aenqueue()`` in one event loop."""

    async def go() -> float:
        await task.aenqueue()  # warm: the executor thread, connections
        started = time.perf_counter()
        for _ in range(n):
            await task.aenqueue()
        return time.perf_counter() - started

    return asyncio.run(go())


class DjangoTasksPeer(PythonPeer):
    """A django.tasks backend: subclasses set ``key``, ``module``, ``dists`` and argv."""

    dists: tuple[str, ...] = ()
    command: tuple[str, ...] = ()  # the worker's manage.py command and its fixed options

    def available(self) -> str | None:
        import django

        why = super().available()
        if why and django.VERSION < (6, 0):
            why += " (it needs Django 6, so Python 3.12+)"
        return why

    def version(self) -> str:
        return dist_version(*self.dists)

    def setup(self, url: str) -> None:
        super().setup(url)
        os.environ["BENCH_URL"] = url
        django_setup()
        self._tasks = importlib.import_module(f"bench.tasks.{self.key}_tasks")
        self._backend = self._tasks.noop.get_backend()

    def _enqueue_noop(self) -> None:
        self._tasks.noop.enqueue()

    def _enqueue_lat(self, ts_ms: float) -> None:
        self._tasks.lat.enqueue(ts_ms)

    def aenqueue_one(self, n: int) -> float:
        return aenqueue_loop(self._tasks.noop, n)

    def enqueue_bulk(self, n: int, batch: int) -> float | None:
        """None (shown as "–") for a backend without a bulk call."""
        if not hasattr(self._backend, "enqueue_many"):
            return None
        return super().enqueue_bulk(n, batch)

    def prefill(self, n: int) -> None:
        if hasattr(self._backend, "enqueue_many"):
            super().enqueue_bulk(n, 1000)
        else:
            self.enqueue_one(n)

    def command_argv(self, *options: str) -> list[str]:
        """``python -m django CMD --settings ... [SUBCOMMAND ...] OPTIONS`` (--settings
        goes right after the command: threadmill's subcommand parser does not know it)."""
        cmd, *rest = self.command
        settings = f"bench.djsettings.{self.key}"
        return [python_exe(), "-m", "django", cmd, "--settings", settings, *rest, *options]

    def worker_argv(self, i: int, latency: bool) -> list[str]:
        return self.command_argv(*self.worker_options(getattr(self, "_variant", None)))

    def worker_options(self, variant: Any) -> list[str]:
        raise NotImplementedError

    def run_workers(self, n: int, n_procs: int, variant: Any = None) -> float:
        self._variant = variant
        try:
            return super().run_workers(n, n_procs, variant)
        finally:
            self._variant = None
