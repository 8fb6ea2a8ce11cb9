"""The suite's servers are real, reachable, isolated, and behave as the fixtures promise."""

from __future__ import annotations

import ast
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

import echomq_django
from echomq_django.devserver import (
    EmbeddedServer,
    ServerBinaryNotFound,
    ServerCommandError,
    ServerStartError,
    find_server_binary,
    server_version,
)
from echomq_django.engine.errors import ServerUnavailable


def test_server_answers_ping_with_its_version(server, redis_client):
    assert redis_client.ping() is True
    info = redis_client.info("server")
    if server.product == "valkey":
        assert info["valkey_version"] == server.version
        assert server.version.split(".")[0] == "8"
    else:
        assert info["redis_version"] == server.version
        assert int(server.version.split(".")[0]) >= 7
    assert server.version == server_version(server.binary)


def test_server_binds_loopback_without_persistence(server, redis_client):
    assert redis_client.config_get("bind")["bind"] == "127.0.0.1"
    assert redis_client.config_get("save")["save"] == ""
    assert redis_client.config_get("appendonly")["appendonly"] == "no"
    assert server.url == f"redis://127.0.0.1:{server.port}/0"


def test_redis_client_starts_from_an_empty_server(redis_client):
    # Each test gets a FLUSHALLed server: this key must not leak into the next test.
    assert redis_client.dbsize() == 0
    redis_client.set("emq:{leak}:probe", "1")


def test_redis_client_is_flushed_between_tests(redis_client):
    assert redis_client.dbsize() == 0


def test_restart_keeps_aof_data(server):
    with EmbeddedServer(binary=server.binary, appendonly=True) as own:
        client = redis.Redis.from_url(own.url)
        client.hset("emq:{q}:job:1", mapping={"state": "pending", "attempts": "0"})
        client.zadd("emq:{q}:pending", {"1": 1})
        old_pid, port, directory = own.pid, own.port, own.dir
        own.restart()
        assert own.pid != old_pid
        assert (own.port, own.dir) == (port, directory)
        client = redis.Redis.from_url(own.url)
        assert client.hgetall("emq:{q}:job:1") == {b"state": b"pending", b"attempts": b"0"}
        assert client.zrange("emq:{q}:pending", 0, -1) == [b"1"]
        assert client.config_get("appendfsync")["appendfsync"] == "everysec"
    assert own.pid is None
    assert not directory.exists()  # a temp dir made by the server is removed on stop
    own.stop()  # idempotent


def test_kill_then_start_again(server):
    own = EmbeddedServer(binary=server.binary).start()
    try:
        own.kill()
        assert own.pid is None
        own.start()
        assert redis.Redis.from_url(own.url).ping()
    finally:
        own.stop()


def test_password_and_unix_socket(server):
    with EmbeddedServer(binary=server.binary, password="s3cr:t@", unixsocket=True) as own:
        assert own.url == f"redis://:s3cr%3At%40@127.0.0.1:{own.port}/0"
        assert redis.Redis.from_url(own.url).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host=own.host, port=own.port, retry=Retry(NoBackoff(), 0)).ping()
        via_socket = redis.Redis(unix_socket_path=str(own.unix_socket_path), password="s3cr:t@")
        assert via_socket.ping()


def test_start_failure_reports_the_server_log(server):
    bad = EmbeddedServer(binary=server.binary, extra_args=["--no-such-directive", "x"])
    with pytest.raises(ServerStartError) as info:
        bad.start(timeout=5)
    assert "no-such-directive" in str(info.value).lower()
    bad.stop()


def test_commands_answer_as_the_server_sent_and_fail_typed(server):
    own = EmbeddedServer(binary=server.binary).start()
    try:
        assert own.command("SET", "k", "v") == "OK"
        assert own.command("INFO", "server").startswith("# Server")  # the text, not parsed
        with pytest.raises(ServerCommandError, match="unknown command"):
            own.command("NO-SUCH-COMMAND")
        own.stop(cleanup=False)
        with pytest.raises(ServerUnavailable):
            own.command("PING", timeout=1)
        assert own.ping() is False
    finally:
        own.stop()


def test_binary_not_found_says_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ServerBinaryNotFound, match="redis-server"):
        find_server_binary("redis")


def test_cluster_has_three_masters_and_is_ok(valkey_cluster):
    assert len(valkey_cluster.urls) == 3
    for node in valkey_cluster.nodes:
        info = valkey_cluster.cluster_info(node)
        assert info["cluster_state"] == "ok"
        assert info["cluster_size"] == "3"
        assert info["cluster_known_nodes"] == "3"
        assert info["cluster_slots_assigned"] == "16384"
    client = redis.Redis.from_url(valkey_cluster.urls[0])
    masters = [n for n in client.cluster("nodes").values() if "master" in n["flags"]]
    assert len(masters) == 3


def test_hash_tagged_key_lands_on_the_node_that_owns_its_slot(valkey_cluster, cluster_client):
    keys = [f"emq:{{{q}}}:pending" for q in ("default", "emails", "slow", "q1", "q2", "q3")]
    by_port = {node.port: node for node in valkey_cluster.nodes}
    seen_ports = set()
    for key in keys:
        cluster_client.zadd(key, {"job": 1})
        direct = redis.Redis.from_url(valkey_cluster.urls[0])
        slot = direct.cluster("keyslot", key)
        # Every key of one queue shares the slot of its hash tag.
        assert direct.cluster("keyslot", key.replace(":pending", ":job:42")) == slot
        owner_port = next(
            r[2][1] for r in direct.execute_command("CLUSTER", "SLOTS") if r[0] <= slot <= r[1]
        )
        seen_ports.add(owner_port)
        for port, node in by_port.items():
            plain = redis.Redis(host=node.host, port=port)
            if port == owner_port:
                assert plain.zscore(key, "job") == 1.0
            else:
                with pytest.raises(redis.exceptions.MovedError):
                    plain.zscore(key, "job")
    assert len(seen_ports) >= 2  # the queues really are spread over the masters


def test_cluster_client_is_flushed_between_tests(cluster_client):
    assert cluster_client.dbsize(target_nodes=RedisCluster.PRIMARIES) == 0
    cluster_client.set("emq:{leak}:x", "1")


def test_cluster_client_is_flushed_again(valkey_cluster, cluster_client):
    client = RedisCluster(
        startup_nodes=[ClusterNode(h, p) for h, p in valkey_cluster.startup_nodes]
    )
    assert client.get("emq:{leak}:x") is None


def test_tls_connects_with_the_ca(tls_server):
    client = redis.Redis.from_url(tls_server.tls_url, **tls_server.client_kwargs)
    assert client.ping()
    assert client.set("emq:{tls}:k", "v")


def test_tls_fails_without_the_ca(tls_server):
    # Verifies against the system trust store, which does not know the test CA.
    client = redis.Redis.from_url(
        tls_server.tls_url,
        ssl_certfile=tls_server.client_kwargs["ssl_certfile"],
        ssl_keyfile=tls_server.client_kwargs["ssl_keyfile"],
    )
    with pytest.raises(redis.ConnectionError) as info:
        client.ping()
    assert "certificate verify failed" in str(info.value).lower() or isinstance(
        info.value.__cause__, ssl.SSLError
    )


def test_tls_requires_a_client_certificate(tls_server):
    client = redis.Redis.from_url(
        tls_server.tls_url, ssl_ca_certs=tls_server.client_kwargs["ssl_ca_certs"]
    )
    with pytest.raises(redis.ConnectionError):
        client.ping()


def test_tls_port_refuses_plain_text(tls_server):
    client = redis.Redis(
        host=tls_server.host,
        port=tls_server.tls_port,
        socket_timeout=1,
        retry=Retry(NoBackoff(), 0),
    )
    with pytest.raises((redis.ConnectionError, redis.TimeoutError)):
        client.ping()


def test_acl_user_is_confined_to_its_key_pattern(acl_server):
    client = redis.Redis.from_url(acl_server.url)
    assert client.acl_whoami() == acl_server.username
    client.set("emq:{q}:metrics", "1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.set("other:key", "1")


def test_make_acl_server_takes_a_rule_string(make_acl_server):
    acl = make_acl_server("~emq:* +get +ping")
    client = redis.Redis.from_url(acl.url)
    assert client.get("emq:{q}:x") is None
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.set("emq:{q}:x", "1")
    admin = redis.Redis.from_url(acl.admin_url)
    assert admin.set("anything", "1")


def test_cluster_connector_runs_on_the_cluster(cluster_connector, cluster_url):
    assert cluster_url.startswith("redis+cluster://127.0.0.1:")
    assert cluster_connector.is_cluster
    cluster_connector.client.set("emq:{c}:k", "v")
    assert cluster_connector.client.get("emq:{c}:k") == "v"


def test_importing_the_dev_server_starts_and_registers_nothing():
    code = (
        "import atexit, redis, echomq_django.engine.errors\n"
        "before = atexit._ncallbacks()\n"
        "from echomq_django.devserver import process\n"
        "print(atexit._ncallbacks() - before, process._prctl.cache_info().currsize)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["0", "0"]  # no exit hook, prctl not loaded


def test_no_runtime_module_imports_the_dev_server():
    package = Path(echomq_django.__file__).parent
    importers = []
    for source in package.rglob("*.py"):
        part = source.relative_to(package).parts[0]
        if part in ("devserver", "testing"):  # the test plugin starts a server of its own
            continue
        for node in ast.walk(ast.parse(source.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or "", *(alias.name for alias in node.names)]
            if any("devserver" in name for name in names):
                importers.append(str(source.relative_to(package)))
    assert importers == []
