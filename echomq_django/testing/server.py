"""The test session's server, and the database each test process uses on it.

A real server, never a stand-in: the embedded Valkey (:mod:`echomq_django.devserver`,
one per test process, so ``pytest -n`` workers never share one), or the server
``ECHOMQ_TEST_URL`` names. On a server of its own a process uses db 0; on
``ECHOMQ_TEST_URL`` the process uses the URL's db plus its ``pytest-xdist`` worker
number (``gw3``: db + 3), as Django suffixes test database names. Either way the
database is flushed before and after each test that uses it: it must be one the
tests own, so a URL equal to ``settings.ECHOMQ["URL"]`` (the dev server's jobs) is
refused.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from ..devserver import EmbeddedServer

TEST_URL_ENV = "ECHOMQ_TEST_URL"


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


def start(dev_url: str | None) -> TestServer:
    """The session's server: ``ECHOMQ_TEST_URL`` (never the dev URL), else a new embedded one."""
    given = os.environ.get(TEST_URL_ENV, "").strip()
    if given:
        url = with_db_offset(given, worker_number())
        if dev_url is not None and url == dev_url:
            raise TestServerError(
                f"{TEST_URL_ENV} is settings.ECHOMQ['URL']: the test plugin flushes its "
                "database before and after each test; give the tests a database of their own "
                "(another db number or server)"
            )
        return TestServer(url)
    server = EmbeddedServer().start()
    return TestServer(server.url, server)
