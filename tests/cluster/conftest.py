"""Cluster fixtures: the engine on the suite's 3-master Valkey Cluster.

Every test that needs a cluster lives in this folder; the helpers over the cluster
(``SPREAD``: queues on the three masters, slots, resharding) are in
tests/support/cluster.py. The root conftest marks these tests ``cluster``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs
from tests.admin.conftest import superuser  # noqa: F401  (test_admin.py's user)
from tests.support.cluster import SPREAD
from tests.support.running import RunningWorker, worker_starter


@pytest.fixture
def jobs(cluster_connector: Connector) -> Jobs:
    return Jobs(cluster_connector)


@pytest.fixture
def start_worker(jobs: Jobs) -> Iterator[Callable[..., RunningWorker]]:
    """start_worker(handler, queues, **Worker options) -> RunningWorker, stopped at teardown."""
    with worker_starter(jobs, SPREAD, lease_ms=2000) as start:
        yield start
