"""The plugin refuses ECHOMQ_TEST_URL when it reaches the dev database, however it is spelled.

It flushes its database before and after each test: a URL that differs from
``settings.ECHOMQ["URL"]`` only in its spelling (no ``/0``, ``localhost`` for
``127.0.0.1``, ``?db=``) reached the dev jobs and flushed them. Real servers
answer what they are (their ``run_id``); a dev server that is down is compared
by address.
"""

from __future__ import annotations

import socket
import threading

import pytest
import redis

from echomq_django.devserver import EmbeddedServer, free_port
from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.testing.server import same_database
from tests.testing.conftest import DEV_DB, TEST_DB
from tests.testing.test_plugin import USER_TESTS, run_user_suite


@pytest.fixture(scope="module")
def own(valkey_server):
    """A server of this module's own: its db 0 is the dev database of some tests here."""
    with EmbeddedServer(binary=valkey_server.binary) as server:
        yield server


@pytest.mark.parametrize(
    ("test_url", "dev_url"),
    [
        ("redis://127.0.0.1:{port}", "redis://127.0.0.1:{port}/0"),
        ("redis://localhost:{port}/0", "redis://127.0.0.1:{port}/0"),
        ("redis://127.0.0.1:{port}/?db=5", "redis://localhost:{port}/5"),
        ("redis://127.0.0.1:{port}/5?socket_timeout=3", "redis://127.0.0.1:{port}/5"),
    ],
)
@pytest.mark.parametrize("up", [True, False], ids=["server up", "server down"])
def test_spellings_of_one_database_are_the_same(own, test_url, dev_url, up):
    port = own.port if up else free_port()
    assert same_database(test_url.format(port=port), dev_url.format(port=port), {})


def test_an_endpoint_that_is_no_server_is_compared_by_address(own):
    """Something that answers, but not in RESP (an HTTP port): no protocol error escapes."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def answer_http() -> None:
            for _ in range(4):
                conn, _ = listener.accept()
                with conn:
                    conn.recv(1024)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        threading.Thread(target=answer_http, daemon=True).start()
        assert same_database(f"redis://127.0.0.1:{port}/0", f"redis://localhost:{port}", {})
        assert not same_database(f"redis://127.0.0.1:{port}/0", own.url, {})


@pytest.mark.parametrize("up", [True, False], ids=["server up", "server down"])
def test_another_db_or_server_is_not(own, valkey_server, up):
    port = own.port if up else free_port()
    assert not same_database(f"redis://127.0.0.1:{port}/1", f"redis://localhost:{port}", {})
    assert not same_database(valkey_server.url, own.url, {})


@pytest.fixture
def dev_db0(own):
    """A dev database at db 0 (``redis://127.0.0.1:PORT/0``) holding a dev job."""
    url = f"redis://127.0.0.1:{own.port}/0"
    jobs = Jobs(Connector.from_url(url))
    jobs.connector.client.flushdb()
    job = jobs.enqueue("default", NewJob(payload="{}", task="dev.tasks.work"))
    yield url
    assert jobs.get("default", job.id).state == "pending", "the dev database was flushed"
    jobs.connector.close()


@pytest.mark.parametrize(
    "test_url",
    ["redis://127.0.0.1:{port}", "redis://localhost:{port}/0"],
    ids=["no db", "localhost"],
)
def test_the_plugin_refuses_another_spelling_of_the_dev_url(own, dev_db0, test_url):
    proc = run_user_suite(dev_db0, test_url.format(port=own.port), "-k", "starts_empty")
    assert proc.returncode != 0
    assert "reaches the database of settings.ECHOMQ['URL']" in proc.stdout + proc.stderr


def test_another_db_on_the_dev_server_is_used(own, dev_db0):
    redis.Redis(port=own.port, db=1).flushdb()
    proc = run_user_suite(dev_db0, f"redis://localhost:{own.port}/1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{USER_TESTS} passed" in proc.stdout


def test_a_test_database_echomq_already_uses_is_refused(dev_server):
    """Queues registered before the first test are not the plugin's (it leaves none)."""
    url, _ = dev_server
    other = Jobs(Connector.from_url(f"{url}/{TEST_DB}"))
    job = other.enqueue("staging", NewJob(payload="{}", task="staging.tasks.work"))
    proc = run_user_suite(f"{url}/{DEV_DB}", f"{url}/{TEST_DB}", "-k", "starts_empty")
    assert proc.returncode != 0
    assert "is an EchoMQ database in use (queue staging)" in proc.stdout + proc.stderr
    assert other.get("staging", job.id).state == "pending"
    other.connector.client.flushdb()
    other.connector.close()
