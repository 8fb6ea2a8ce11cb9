"""ECHOMQ["DURABLE_ENQUEUE"]: enqueue() returns once the job is on a real replica (WAIT)
or fsynced to AOF (WAITAOF); a replica that does not answer in time is NotDurable,
which names the jobs, and the job may or may not be there: its id says.

The replica is a second server of the suite's own binary, started with
``--replicaof``; "does not answer" is that process stopped with SIGSTOP.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time

import pytest
import redis

from echomq_django import conf
from echomq_django.devserver import EmbeddedServer, server_product
from echomq_django.engine.connector import Connector
from echomq_django.engine.durable import Durability, DurableJobs
from echomq_django.engine.errors import EnqueueUnknown, NotDurable
from echomq_django.engine.jobs import BATCH_MAX, NewJob
from echomq_django.server_checks import durability_findings
from tests.django.tasks import echo
from tests.support.cluster import SPREAD
from tests.support.proxy import FaultProxy
from tests.support.waiting import wait_until

Q = "default"


def link_up(replica: EmbeddedServer) -> bool:
    return "master_link_status:up" in replica.command("INFO", "replication")


@pytest.fixture
def primary_and_replica(server):
    """A primary (AOF on, appendfsync always) and one replica of it (AOF on too)."""
    quick = ["--repl-diskless-sync-delay", "0"]
    primary = EmbeddedServer(
        binary=server.binary, appendonly=True, extra_args=[*quick, "--appendfsync", "always"]
    )
    replica = EmbeddedServer(binary=server.binary, appendonly=True)
    try:
        primary.start()
        replica.extra_args += [*quick, "--replicaof", primary.host, str(primary.port)]
        replica.start()
        wait_until(lambda: link_up(replica), timeout=30)
        yield primary, replica
    finally:  # SIGKILL: a graceful SHUTDOWN of the pair took 10 s here (no data to keep)
        replica.kill()
        primary.kill()
        for s in (replica, primary):
            s.stop()


@pytest.fixture
def durable(settings, primary_and_replica):
    primary, _ = primary_and_replica

    def use(**durability):
        settings.ECHOMQ = {"URL": primary.url, "DURABLE_ENQUEUE": durability}
        conf.reset()
        return conf.get_jobs()

    yield use
    conf.reset()


def test_an_acknowledged_enqueue_is_on_the_replica(durable, primary_and_replica):
    _, replica = primary_and_replica
    durable(REPLICAS=1, TIMEOUT=5)
    on_replica = redis.Redis.from_url(replica.url, decode_responses=True)
    for n in range(20):  # read at once after each enqueue: no wait, no retry
        result = echo.enqueue(n)
        assert on_replica.hget(f"emq:{{{Q}}}:job:{result.id}", "state") == "pending", n
    on_replica.close()


def test_a_replica_that_does_not_answer_in_time_is_not_durable(durable, primary_and_replica):
    _, replica = primary_and_replica
    jobs = durable(REPLICAS=1, TIMEOUT=0.3)
    os.kill(replica.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(NotDurable) as info:
            echo.enqueue("maybe")
        waited = time.monotonic() - started
    finally:
        os.kill(replica.pid, signal.SIGCONT)
    assert 0.25 <= waited < 5, waited  # the TIMEOUT, plus a round trip (a busy machine)
    (job_id,) = info.value.job_ids
    message = str(info.value)
    assert job_id in message and "1 replica(s) (0 acknowledged)" in message
    assert "look them up by id" in message
    assert jobs.get(Q, job_id).state == "pending", "written on the primary: it may survive"


def test_local_waits_for_the_aof_fsync_of_primary_and_replica(durable, server):
    version = tuple(int(n) for n in server.version.split(".")[:2])
    if server_product(server.binary) == "redis" and version < (7, 2):
        pytest.skip("WAITAOF needs Redis 7.2 (or Valkey)")
    jobs = durable(LOCAL=True, TIMEOUT=5)  # the primary's fsync: about a millisecond
    for n in range(3):
        assert jobs.get(Q, echo.enqueue(n).id).state == "pending"
    jobs = durable(REPLICAS=1, LOCAL=True, TIMEOUT=5)  # a replica reports its AOF fsync in
    assert jobs.get(Q, echo.enqueue("both").id).state == "pending"  # its next ack: up to 1 s


def test_check_deploy_says_when_the_server_cannot_meet_it(durable, primary_and_replica):
    primary, _ = primary_and_replica
    jobs = durable(REPLICAS=2, LOCAL=True)
    [finding] = durability_findings(jobs.connector)
    assert finding.id == "echomq.W014" and "1 connected replica(s)" in finding.message
    primary.command("CONFIG", "SET", "appendonly", "no")
    assert len(durability_findings(jobs.connector)) == 2


@pytest.mark.parametrize(
    "bad",
    [{"REPLICAS": -1}, {"REPLICAS": "1"}, {"LOCAL": "yes"}, {}, {"REPLICAS": 1, "TIMEOUT": 0},
     {"REPLICAS": 1, "TIMEOUT": True}, {"REPLICAS": 1, "REPLICA": 1}, "1"],
)  # fmt: skip
def test_a_bad_setting_is_a_check_error(settings, bad):
    from echomq_django.checks import check_settings

    settings.ECHOMQ = {"URL": "redis://127.0.0.1:1/0", "DURABLE_ENQUEUE": bad}
    conf.reset()
    assert [m.id for m in check_settings()] == ["echomq.E007"]


def test_on_a_cluster_the_wait_runs_on_the_queue_node(cluster_url, cluster_client):
    """The suite's cluster has no replicas: WAIT 1 times out on the node of each queue,
    WAITAOF is refused (AOF off); either way each job is on its node, NotDurable says so."""
    connector = Connector.from_url(cluster_url)
    for durability, words in (
        (Durability(replicas=1, timeout_s=0.1), "1 replica(s) (0 acknowledged)"),
        (Durability(local=True, timeout_s=0.1), "the server refused WAITAOF"),
    ):
        jobs = DurableJobs(connector, durability)
        for queue in SPREAD:  # one queue per master
            with pytest.raises(NotDurable, match=re.escape(words)) as info:
                jobs.enqueue(queue, NewJob(payload="{}"))
            (job_id,) = info.value.job_ids
            assert jobs.get(queue, job_id).state == "pending"
    connector.close()


class SilentServer:
    """A listener that accepts connections and never answers (a hung server, a
    half-open path), counting the connections made to it."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self._listener.getsockname()[1])

    @property
    def connections(self) -> int:
        return len(self._held)

    def _accept(self) -> None:
        while True:
            try:
                self._held.append(self._listener.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self._listener.close()
        for conn in self._held:
            conn.close()


def test_a_lost_server_ends_a_bulk_durable_enqueue_at_its_first_call(server):
    """Each script call of a durable enqueue is a round trip of its own (the wait counts
    its connection's writes). Once one meets a lost server the enqueue's outcome is
    unknown whatever the others do: they are not sent, each to wait out its own socket
    timeout (a bulk enqueue of 2,500 jobs hung five timeouts), or to store jobs its
    caller is told may not be stored."""
    silent = SilentServer()
    with FaultProxy(server.host, server.port) as proxy:
        jobs = DurableJobs(
            Connector.from_url(proxy.url, socket_timeout=0.3),
            Durability(replicas=1, timeout_s=0.01),
        )
        with pytest.raises(NotDurable):  # no replica: this enqueue registers the queue
            jobs.enqueue(Q, NewJob(payload="0"))
        proxy.target = silent.address  # the server hangs from now on
        proxy.cut_all()
        batch = [NewJob(payload="1") for _ in range(3 * BATCH_MAX)]  # three script calls
        with pytest.raises(EnqueueUnknown) as unknown:
            jobs.enqueue_many(Q, batch)
        jobs.connector.close()
    silent.close()
    assert unknown.value.job_ids == tuple(job.id for job in batch)
    assert silent.connections == 1, "a call was sent after the server was lost"
