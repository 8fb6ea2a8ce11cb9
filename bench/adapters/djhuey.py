"""Huey's own django.tasks backend (``huey.contrib.djhuey.tasks_backend``) and ``run_huey``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from bench.adapters.django_tasks import DjangoTasksPeer


class DjHueyAdapter(DjangoTasksPeer):
    key = "djhuey"
    name = "Huey (django.tasks)"
    module = "huey.contrib.djhuey"
    dists = ("huey",)
    command = ("run_huey",)
    bulk_api = ""  # none: no enqueue_many
    notes = (
        "Huey (django.tasks): `HueyBackend` from `huey.contrib.djhuey.tasks_backend` on "
        "RedisHuey (blocking, results on: the backend keeps each job's record as a Huey "
        "result), `manage.py run_huey -w 1 -k thread` per worker process; no bulk API.",
    )

    def available(self) -> str | None:
        # Importing huey.contrib.djhuey reads settings.HUEY before Django is set up:
        # look for the file instead.
        if importlib.util.find_spec("huey") is None:
            return "not installed (huey)"
        contrib = importlib.util.find_spec("huey.contrib")
        where = contrib.submodule_search_locations if contrib else None
        if not any((Path(d) / "djhuey" / "tasks_backend.py").is_file() for d in where or ()):
            return "this huey has no django.tasks backend (huey.contrib.djhuey.tasks_backend)"
        return None

    def worker_options(self, variant: Any) -> list[str]:
        return ["-w", "1", "-k", "thread", "-q"]


ADAPTER = DjHueyAdapter()
