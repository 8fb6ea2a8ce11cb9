"""Cluster fixtures: the engine on the suite's 3-master Valkey Cluster.

Every test that needs a cluster lives in this folder; the helpers over the cluster
(``SPREAD``: queues on the three masters, slots, resharding) are in
tests/support/cluster.py. The root conftest marks these tests ``cluster``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from echomq_django.devserver import EmbeddedServer
from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs
from tests.admin.conftest import superuser  # noqa: F401  (test_admin.py's user)
from tests.support import servers
from tests.support.cluster import SPREAD, info_field
from tests.support.running import RunningWorker, worker_starter
from tests.support.waiting import wait_until


@pytest.fixture
def jobs(cluster_connector: Connector) -> Jobs:
    return Jobs(cluster_connector)


@pytest.fixture
def start_worker(jobs: Jobs) -> Iterator[Callable[..., RunningWorker]]:
    """start_worker(handler, queues, **Worker options) -> RunningWorker, stopped at teardown."""
    with worker_starter(jobs, SPREAD, lease_ms=2000) as start:
        yield start


@pytest.fixture
def cluster_with_replica(tmp_path):
    """One master holding every slot, plus a replica of it that can take over."""
    cluster = servers.start_valkey_cluster(1)
    replica_dir = tmp_path / "replica"
    replica = EmbeddedServer(
        binary=cluster.binary,
        dir=replica_dir,
        extra_args=[
            "--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
            "--cluster-config-file", str(replica_dir / "nodes.conf"),
        ],
    )  # fmt: skip
    try:
        master = cluster.nodes[0]
        master.command("CONFIG", "SET", "repl-diskless-sync-delay", "0")  # sync at once
        # CLUSTER SLOTS lists a replica only once its offset is past 0, which on an idle
        # master takes its first replication PING (every 10 s by default, 1 s here).
        master.command("CONFIG", "SET", "repl-ping-replica-period", "1")
        replica.start()
        replica.command("CLUSTER", "MEET", master.host, master.port)
        master_id = master.command("CLUSTER", "MYID")
        wait_until(lambda: master_id in replica.command("CLUSTER", "NODES"))
        replica.command("CLUSTER", "REPLICATE", master_id)
        wait_until(lambda: info_field(replica, "replication", "master_link_status") == "up")
        wait_until(lambda: master.command("CLUSTER", "REPLICAS", master_id))  # it can vote
        wait_until(lambda: len(master.command("CLUSTER", "SLOTS")[0]) > 3)  # clients learn it
        yield master, replica
    finally:
        replica.stop()
        cluster.stop()
