"""Flow-control fixtures: the engine on the suite's servers, worker processes, Django.

``spawn``, ``valkey_url`` and ``valkey_jobs`` are the worker tests' (tests/worker/conftest.py),
``echomq`` the Django tests' (tests/django/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from echomq_django.engine.jobs import Jobs
from tests.django.conftest import echomq
from tests.worker.conftest import spawn, valkey_jobs, valkey_url

__all__ = ["echomq", "spawn", "valkey_jobs", "valkey_url"]


@pytest.fixture
def jobs(connector) -> Iterator[Jobs]:
    yield Jobs(connector)
