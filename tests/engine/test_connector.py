"""The connector on real servers: URL forms, masked secrets, error mapping, a dead server."""

from __future__ import annotations

import contextlib
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import pytest
import redis

from echomq_django.embedded import EmbeddedServer, free_port
from echomq_django.engine import clients as clients_module
from echomq_django.engine import script
from echomq_django.engine.connector import Call, Connector, mask_url, translate_error
from echomq_django.engine.errors import (
    AccessDenied,
    InvalidURL,
    JobExists,
    JobNotFound,
    ScriptError,
    ServerOutOfMemory,
    ServerUnavailable,
    StaleToken,
    WrongState,
)
from echomq_django.engine.jobs import Jobs

from .conftest import QUEUE, WORKER, new

PASSWORD = "s3cr:t@/pw"  # characters that must be quoted in a URL


def round_trip(url: str, **options) -> None:
    """A job goes through enqueue, claim and complete over ``url``."""
    connector = Connector.from_url(url, **options)
    try:
        jobs = Jobs(connector)
        job_id = jobs.enqueue(QUEUE, new()).id
        (claimed,) = jobs.claim(QUEUE, WORKER).jobs
        assert claimed.id == job_id
        jobs.complete(QUEUE, job_id, claimed.token, '"done"')
        assert jobs.get(QUEUE, job_id).result == '"done"'
    finally:
        connector.close()


@pytest.fixture
def own_server(server):
    """A fresh server of the same kind as ``server``, started with the given options."""
    started: list[EmbeddedServer] = []

    def start(**options) -> EmbeddedServer:
        s = EmbeddedServer(binary=server.binary, **options).start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def test_redis_url_with_a_password(own_server):
    s = own_server(password=PASSWORD)
    assert "%40" in s.url  # the URL carries the password quoted
    round_trip(s.url)
    with pytest.raises(ServerUnavailable) as refused:
        Connector.from_url(s.url.replace("s3cr", "wrong")).ping()
    assert "wrong" not in str(refused.value) and PASSWORD not in str(refused.value)


def test_redis_url_with_an_acl_user(server, make_acl_server):
    acl = make_acl_server("~emq:* +@all", binary=server.binary)
    assert acl.url.startswith(f"redis://{acl.username}:")
    round_trip(acl.url)
    outside = Connector.from_url(acl.url)
    with pytest.raises(redis.exceptions.NoPermissionError):
        outside.client.set("not-emq", "1")  # the ACL holds: only emq:* keys
    outside.close()


def test_unix_socket_url(own_server):
    s = own_server(unixsocket=True)
    round_trip(f"unix://{s.unix_socket_path}?db=0")


def test_rediss_url_with_mutual_tls(tls_server):
    round_trip(tls_server.tls_url, **tls_server.client_kwargs)


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("redis://user:pw@h:6379/0", "redis://user:***@h:6379/0"),
        ("rediss://user:p%40ss@h/1", "rediss://user:***@h/1"),
        ("redis://h:6379/0", "redis://h:6379/0"),
        ("redis://user@h:6379/0", "redis://user@h:6379/0"),
        ("unix://user:pw@/tmp/r.sock?db=2", "unix://user:***@/tmp/r.sock?db=2"),
        ("redis://h/0?password=pw", "redis://h/0?password=***"),
    ],
)
def test_mask_url_hides_every_password(url, masked):
    assert mask_url(url) == masked
    assert Connector.from_url(url).safe_url == masked


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("EMQSTALE complete token mismatch: holder 2, caller 1", StaleToken),
        ("EMQNOTFOUND job x", JobNotFound),
        ("EMQEXISTS job x exists already", JobExists),
        ("EMQSTATE job x is active, not scheduled", WrongState),
        ("ERR user_script:1: Script attempted to access nonexistent global variable", ScriptError),
        ("EMQUNKNOWN something", ScriptError),
        (
            "ACL failure in script: User emq has no permissions to run the 'incrby' command",
            AccessDenied,
        ),
    ],
)
def test_script_error_replies_map_to_typed_errors(reply, error):
    suffix = " script: 0123abcd, on @user_script:12."
    mapped = translate_error(redis.ResponseError(reply + suffix))
    assert type(mapped) is error
    if reply.startswith(("EMQSTALE", "EMQNOTFOUND", "EMQEXISTS", "EMQSTATE")):
        assert str(mapped) == reply.split(" ", 1)[1]  # code and script location stripped


def test_connection_errors_and_oom_map_to_typed_errors():
    assert type(translate_error(redis.ConnectionError("refused"))) is ServerUnavailable
    assert type(translate_error(redis.TimeoutError("slow"))) is ServerUnavailable
    oom = redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'")
    assert type(translate_error(oom)) is ServerOutOfMemory


def test_emqstale_from_a_real_server_is_stale_token(jobs):
    jobs.enqueue(QUEUE, new())
    (claimed,) = jobs.claim(QUEUE, WORKER).jobs
    with pytest.raises(StaleToken, match=r"^complete token mismatch: holder 1, caller 7$"):
        jobs.complete(QUEUE, claimed.id, 7)


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{PASSWORD}@127.0.0.1:6399/0",  # unquoted: parses as host '' + a path
        "redis://:pw#frag@127.0.0.1:6399/0",
        "redis:///0",
        "rediss://",
        "unix://",
        "redis+cluster://:a/b@127.0.0.1:7000",
    ],
)
def test_a_url_without_a_host_is_refused_before_connecting(url):
    """redis-py would take these as localhost:6379, a server that is not ours."""
    with pytest.raises(InvalidURL) as refused:
        Connector.from_url(url)
    assert "pw" not in str(refused.value) and "s3cr" not in str(refused.value)


def test_nothing_listening_is_server_unavailable():
    jobs = Jobs(
        Connector.from_url(f"redis://:{quote(PASSWORD, safe='')}@127.0.0.1:{free_port()}/0")
    )
    for call in (
        lambda: jobs.enqueue(QUEUE, new()),
        lambda: jobs.claim(QUEUE, WORKER),
        lambda: jobs.stats(QUEUE),
        lambda: jobs.throughput(QUEUE),  # plain commands: TIME, then a pipeline of HMGETs
        lambda: jobs.queues(),
        lambda: jobs.get(QUEUE, new().id),
        lambda: jobs.connector.ping(),
    ):
        with pytest.raises(ServerUnavailable) as caught:
            call()
        assert "s3cr" not in str(caught.value)


def test_a_server_that_dies_mid_session_is_server_unavailable(own_server):
    s = own_server()
    jobs = Jobs(Connector.from_url(s.url))
    job_id = jobs.enqueue(QUEUE, new()).id
    s.stop()
    with pytest.raises(ServerUnavailable):
        jobs.claim(QUEUE, WORKER)
    with pytest.raises(ServerUnavailable):
        jobs.connector.run_many([Call(script.load("stats"), ["emq:{q}:pending"], [])])
    with pytest.raises(ServerUnavailable):
        jobs.get(QUEUE, job_id)


def test_a_primary_turned_replica_is_server_unavailable(own_server):
    """READONLY (the server was demoted, e.g. by a failover): the call did not run; try later."""
    primary, demoted = own_server(), own_server()
    jobs = Jobs(Connector.from_url(demoted.url))
    try:
        jobs.connector.client.replicaof("127.0.0.1", primary.port)
        with pytest.raises(ServerUnavailable, match="ReadOnlyError"):
            jobs.enqueue(QUEUE, new())
        with pytest.raises(ServerUnavailable, match="ReadOnlyError"):
            jobs.enqueue_many(QUEUE, [new()])  # a pipelined call: the reply is an error value
    finally:
        jobs.connector.close()


def test_a_silent_server_is_server_unavailable_not_a_hang(monkeypatch):
    """Bytes stop with no FIN (a dead NAT entry, a frozen host): without a socket timeout
    redis-py waits for ever, wedging a web request's enqueue or a worker's heartbeat."""
    monkeypatch.setattr(clients_module, "DEFAULT_SOCKET_TIMEOUT_S", 0.3)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; nobody answers
        jobs = Jobs(Connector.from_url(f"redis://127.0.0.1:{silent.getsockname()[1]}/0"))
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(jobs.claim, QUEUE, WORKER)
            try:
                with pytest.raises(ServerUnavailable, match="Timeout"):
                    call.result(timeout=5)
            finally:
                jobs.connector.close()


# -- the connector's own connections (script calls, not redis-py's client layer) -------

ECHO = script.Script("echo", "return ARGV[1]")
SLOW = script.Script(
    "slow", "local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return ARGV[2]"
)


def test_an_interrupted_call_never_hands_its_reply_to_the_next(standalone, url, monkeypatch):
    """A call cut off between its send and its reply (an interrupt, a timeout) drops its
    connection: the late reply must never be read as the next call's."""
    connector = Connector.from_url(url)
    connector.run(ECHO, ["k"], ["warm"])
    connector.run(SLOW, ["k"], [10, "warm"])
    read = redis.connection.Connection.read_response
    armed = [True]

    def interrupted(self, *args, **kwargs):
        if armed[0]:
            armed[0] = False
            raise KeyboardInterrupt  # as if Ctrl-C landed while the reply was on its way
        return read(self, *args, **kwargs)

    monkeypatch.setattr(redis.connection.Connection, "read_response", interrupted)
    with pytest.raises(KeyboardInterrupt):
        connector.run(SLOW, ["k"], [3_000_000, "the interrupted call's reply"])
    assert connector.run(ECHO, ["k"], ["mine"]) == "mine"
    assert connector.run_many([Call(ECHO, ["k"], [str(i)]) for i in range(3)]) == ["0", "1", "2"]
    connector.close()


def test_max_connections_bounds_the_script_connections(standalone, url):
    """``max_connections`` (ECHOMQ OPTIONS) holds for script calls: past it, a call is
    refused as ServerUnavailable, as redis-py's own pool refuses it."""
    connector = Connector.from_url(url, max_connections=2)
    connector.run(ECHO, ["k"], ["warm"])

    def call(i: int) -> str:
        try:
            return connector.run(SLOW, ["k"], [200_000, str(i)])
        except ServerUnavailable as exc:
            return f"refused: {exc}"

    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(call, range(24)))
    assert any(r.startswith("refused") and "max_connections" in r for r in replies)
    assert sum(not r.startswith("refused") for r in replies) >= 2
    assert len(connector._connections._all) <= 2
    connector.close()


def test_close_disconnects_connections_in_use_too(standalone, url):
    """As ``pool.disconnect()`` does: a call in flight when the connector closes fails
    (ServerUnavailable) instead of leaving its connection open after close()."""
    connector = Connector.from_url(url)
    connector.run(SLOW, ["k"], [10, "warm"])
    with ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(connector.run, SLOW, ["k"], [5_000_000, "late"])
        time.sleep(0.05)
        connector.close()
        with contextlib.suppress(ServerUnavailable):
            in_flight.result()
    made = list(connector._connections._all)
    assert made and all(getattr(conn, "_sock", None) is None for conn in made)
    assert connector.run(ECHO, ["k"], ["after close"]) == "after close"  # reconnects on use
    connector.close()
