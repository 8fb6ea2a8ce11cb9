"""Flow-control fixtures: the engine on the suite's servers.

``spawn``, ``valkey_url``, ``valkey_jobs`` and ``echomq`` are shared: tests/support/fixtures.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from echomq_django.engine.jobs import Jobs


@pytest.fixture
def jobs(connector) -> Iterator[Jobs]:
    yield Jobs(connector)
