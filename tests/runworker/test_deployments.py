"""``manage.py runworker`` / ``runreaper`` in subprocesses, configured as a deployment is:
on the 3-master cluster, over mutual TLS, as the minimal ACL user; and refused with
a clear error, its password masked, when the credentials are wrong.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from echomq_django import conf
from echomq_django.compat import TaskResultStatus
from echomq_django.engine.acl import worker_acl_rules
from tests.django import tasks
from tests.support import deployed_settings
from tests.support.cluster import SPREAD, blocked_clients, node_of
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
ACL_PASSWORD = "s3cret-for-echomq"


def manage_env(echomq: dict[str, Any]) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.support.deployed_settings",
        "ECHOMQ_TEST_SETTINGS": json.dumps(echomq),
    }


def manage(echomq: dict[str, Any], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=manage_env(echomq),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def use(settings):
    """use(ECHOMQ dict): point this process's Django at it, as the subprocesses are."""

    def point(echomq: dict[str, Any]):
        settings.ECHOMQ = echomq
        settings.TASKS = deployed_settings.TASKS
        conf.reset()
        return conf.get_jobs()

    yield point
    conf.reset()


def enqueue_everywhere(n: int = 1) -> list:
    return [tasks.add.using(queue_name=q).enqueue(i, 1) for q in SPREAD for i in range(n)]


def assert_all_ran(results, worker: str) -> None:
    for r in results:
        r.refresh()
        assert (r.status, r.return_value, r.worker_ids[-1]) == (
            TaskResultStatus.SUCCESSFUL, r.args[0] + 1, worker
        )  # fmt: skip


# -- the cluster ----------------------------------------------------------------------------


def test_runreaper_and_runworker_on_the_cluster(use, cluster_url, cluster_client):
    echomq = {"URL": cluster_url, "QUEUES": SPREAD}
    jobs = use(echomq)
    results = enqueue_everywhere(2)
    (crashed,) = jobs.claim(SPREAD[2], "crashed-worker", lease_ms=1).jobs  # its worker died
    time.sleep(0.01)

    reaper = manage(echomq, "runreaper", "--once")
    assert reaper.returncode == 0, reaper.stderr
    assert jobs.get(SPREAD[2], crashed.id).state == "pending"

    worker = manage(echomq, "runworker", *SPREAD, "--burst", "--name", "cluster-worker")
    assert worker.returncode == 0, worker.stderr
    assert_all_ran(results, "cluster-worker")
    assert "CROSSSLOT" not in worker.stderr + reaper.stderr


def test_an_idle_runworker_picks_up_from_its_other_queues_promptly(
    use, cluster_url, valkey_cluster, record_property
):
    echomq = {"URL": cluster_url}
    use(echomq)
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "runworker", *SPREAD, "--name", "idle-worker"],
        cwd=ROOT,
        env=manage_env(echomq),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        nodes = [node_of(valkey_cluster, q) for q in SPREAD]
        wait_until(lambda: all(blocked_clients(n) == 1 for n in nodes), timeout=30)
        pickup = {}
        for queue in (SPREAD[2], SPREAD[1]):
            sent = time.monotonic()
            result = tasks.add.using(queue_name=queue).enqueue(1, 1)
            wait_until(lambda r=result: r.refresh() or r.status == TaskResultStatus.SUCCESSFUL)
            pickup[queue] = time.monotonic() - sent
        record_property("pickup_ms", {q: round(s * 1000) for q, s in pickup.items()})
        assert max(pickup.values()) < 1.0, pickup  # the worker's idle block is 5 s
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr


@pytest.fixture
def cluster_acl_user(valkey_cluster):
    """The minimal EchoMQ ACL user on every node (ACLs are per node); removed afterwards."""
    for node in valkey_cluster.nodes:
        node.command(
            "ACL",
            "SETUSER",
            "echomq",
            "reset",
            "on",
            f">{ACL_PASSWORD}",
            *worker_acl_rules().split(),
        )
    yield "echomq"
    for node in valkey_cluster.nodes:
        node.command("ACL", "DELUSER", "echomq")


def test_runworker_on_the_cluster_as_the_minimal_acl_user_with_options(
    use, valkey_cluster, cluster_client, cluster_acl_user
):
    """CLUSTER=True on a plain redis:// URL; OPTIONS reach every node's connections."""
    node = valkey_cluster.nodes[1]
    echomq = {
        "URL": f"redis://{cluster_acl_user}:{ACL_PASSWORD}@{node.host}:{node.port}/0",
        "CLUSTER": True,
        "OPTIONS": {"socket_timeout": 10, "health_check_interval": 15, "client_name": "emq"},
    }
    jobs = use(echomq)
    results = enqueue_everywhere()
    for primary in jobs.connector.client.get_primaries():
        made = primary.redis_connection.connection_pool.make_connection()
        assert (made.socket_timeout, made.health_check_interval) == (10, 15)
        assert (made.username, made.client_name) == (cluster_acl_user, "emq")
    worker = manage(echomq, "runworker", *SPREAD, "--burst", "--name", "acl-worker")
    assert worker.returncode == 0, worker.stderr
    assert_all_ran(results, "acl-worker")
    assert ACL_PASSWORD not in worker.stderr


# -- TLS and ACL on one server --------------------------------------------------------------


def test_runworker_over_mutual_tls(use, tls_server):
    echomq = {
        "URL": tls_server.tls_url,
        "OPTIONS": {**tls_server.client_kwargs, "socket_timeout": 10, "health_check_interval": 15},
    }
    jobs = use(echomq)
    jobs.connector.client.flushall()
    results = enqueue_everywhere()
    worker = manage(echomq, "runworker", *SPREAD, "--burst", "--name", "tls-worker")
    assert worker.returncode == 0, worker.stderr
    assert_all_ran(results, "tls-worker")
    refused = manage({"URL": tls_server.tls_url}, "runworker", "--burst")  # no CA, no cert
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr, refused.stderr


def test_runreaper_and_runworker_as_the_minimal_acl_user(use, make_acl_server):
    acl = make_acl_server(worker_acl_rules(), password=ACL_PASSWORD)
    echomq = {"URL": acl.url, "QUEUES": SPREAD}
    jobs = use(echomq)
    results = enqueue_everywhere()
    (crashed,) = jobs.claim(SPREAD[0], "crashed-worker", lease_ms=1).jobs
    time.sleep(0.01)
    reaper = manage(echomq, "runreaper", "--once")
    assert reaper.returncode == 0, reaper.stderr
    assert jobs.get(SPREAD[0], crashed.id).state == "pending"
    worker = manage(echomq, "runworker", *SPREAD, "--burst", "--name", "acl-worker")
    assert worker.returncode == 0, worker.stderr
    assert_all_ran(results, "acl-worker")


@pytest.mark.parametrize("where", ["server", "cluster"])
def test_wrong_credentials_are_a_clear_error_with_the_password_masked(
    where, make_acl_server, valkey_cluster, cluster_acl_user
):
    wrong = "not-the-Secret-42"
    if where == "server":
        acl = make_acl_server(worker_acl_rules(), password=ACL_PASSWORD)
        url = acl.url.replace(ACL_PASSWORD, wrong)
    else:
        node = valkey_cluster.nodes[0]
        url = f"redis+cluster://{cluster_acl_user}:{wrong}@{node.host}:{node.port}/0"
    for command in ("runworker", "runreaper"):
        proc = manage({"URL": url}, command, "--burst" if command == "runworker" else "--once")
        assert proc.returncode != 0
        assert wrong not in proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        assert "username-password" in proc.stderr or "WRONGPASS" in proc.stderr, proc.stderr
