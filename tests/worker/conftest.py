"""Worker-layer fixtures: engine workers in threads (tests.support.running).

In-process workers run ``Worker.run`` in a thread and are stopped at teardown.
Subprocesses (``spawn``, ``valkey_url``, ``valkey_jobs``: tests/support/fixtures.py) are
real processes that tests kill with SIGKILL, SIGTERM or SIGSTOP; every one still
alive at teardown is killed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from echomq_django.engine.jobs import Jobs
from tests.support.running import RunningWorker, worker_starter


@pytest.fixture
def jobs(connector) -> Jobs:
    return Jobs(connector)


@pytest.fixture
def start_worker(jobs) -> Iterator[Callable[..., RunningWorker]]:
    """start_worker(handler, queues=["q"], **Worker options) -> RunningWorker."""
    with worker_starter(jobs, ("q",), lease_ms=1000) as start:
        yield start
