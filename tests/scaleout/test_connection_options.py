"""The connection options production uses: ACL users, passwords, TLS, unix sockets.

Each test drives the whole engine life cycle (enqueue, claim, extend, retry,
complete, reap, promote, reads, the blocking wait) through the option under test.
"""

from __future__ import annotations

import json

import pytest
import redis

from echomq_django.engine.acl import worker_acl_rules
from echomq_django.engine.connector import Connector, mask_url
from echomq_django.engine.errors import AccessDenied
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys


def exercise(connector: Connector) -> None:
    """Every engine operation once: each must be allowed by the connection's rights."""
    jobs = Jobs(connector)
    first = jobs.enqueue("acl", NewJob(payload='{"n": 1}', task="t"))
    jobs.enqueue_many("acl", [NewJob(payload="{}", due_ms=1) for _ in range(3)])
    claim = jobs.claim("acl", "w-1", count=10, lease_ms=5_000)
    assert {c.id for c in claim.jobs} >= {first.id}
    head, *rest = claim.jobs
    jobs.extend("acl", head.id, head.token, 5_000)
    jobs.complete("acl", head.id, head.token, json.dumps({"ok": True}))
    error = json.dumps({"exception_class_path": "ValueError", "traceback": "tb"})
    for c in rest:
        jobs.retry("acl", c.id, c.token, error=error, summary="ValueError: x", give_up=True)
    assert jobs.retry_dead("acl").moved == len(rest)
    jobs.reap("acl")
    jobs.promote("acl")
    jobs.trim("acl", "completed", purge=True)
    assert jobs.stats("acl").counts["pending"] == len(rest)
    assert jobs.page("acl", "pending").total == len(rest)
    assert jobs.get("acl", first.id) is None  # purged
    assert "acl" in jobs.queues()
    jobs.throughput("acl", 5)
    connector.client.bzpopmin([QueueKeys.of("acl").wake], timeout=0.01)


def test_minimal_acl_user_runs_every_operation(make_acl_server):
    acl = make_acl_server(worker_acl_rules())
    connector = Connector.from_url(acl.url)
    exercise(connector)
    # The rights are really restricted: a key outside the prefix and FLUSHALL are refused.
    with pytest.raises(redis.exceptions.NoPermissionError):
        connector.client.set("other:key", "1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        connector.client.flushall()


def test_acl_user_without_script_rights_gets_a_clear_error(make_acl_server):
    acl = make_acl_server("~emq:* -@all +ping +evalsha +script|load")
    jobs = Jobs(Connector.from_url(acl.url))
    with pytest.raises(AccessDenied, match="NoPermissionError"):
        jobs.enqueue("acl", NewJob(payload="{}"))


def test_wrong_password_is_a_clear_error_with_the_password_masked(make_acl_server):
    acl = make_acl_server(worker_acl_rules())
    bad_url = acl.url.replace(acl.password, "wrong-secret")
    connector = Connector.from_url(bad_url)
    with pytest.raises(AccessDenied) as info:  # a ServerUnavailable that start-up stops on
        connector.ping()
    assert "wrong-secret" not in str(info.value)
    assert "wrong-secret" not in connector.safe_url
    assert mask_url(bad_url).startswith(f"redis://{acl.username}:***@")


def test_tls_with_ca_and_client_certificate(tls_server):
    connector = Connector.from_url(tls_server.tls_url, **tls_server.client_kwargs)
    connector.client.flushall()
    exercise(connector)


def test_tls_without_the_ca_fails_cleanly(tls_server):
    connector = Connector.from_url(tls_server.tls_url)
    with pytest.raises(AccessDenied, match="certificate verify failed"):
        connector.ping()


def test_unix_socket(make_unix_server):
    connector = Connector.from_url(make_unix_server)
    exercise(connector)


@pytest.fixture
def make_unix_server(tmp_path):
    from echomq_django.devserver import EmbeddedServer

    server = EmbeddedServer(unixsocket=True).start()
    yield f"unix://{server.unix_socket_path}?db=0"
    server.stop()
