"""The pytest plugin (entry point ``echomq``): a real server and an isolated queue per test.

Fixtures:

* ``echomq_server`` (session): the server the tests' jobs go to, the embedded
  Valkey started for this test process, or ``ECHOMQ_TEST_URL``
  (see :mod:`echomq_django.testing.server`).
* ``echomq`` (per test): points ``settings.ECHOMQ["URL"]`` at that server for the
  test, flushes its database before and after, and gives the test a
  :class:`~echomq_django.testing.queues.TestQueues` (``drain()``, ``jobs()``,
  ``assert_empty()``, ``run_schedule()``).

Loaded by every pytest run in an environment where echomq-django is installed, so
it does nothing until a test asks for one of its fixtures: no server is started,
no setting is changed, and nothing of EchoMQ (the engine, redis-py) is imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported in the fixtures: the plugin loads in every pytest run
    from .queues import TestQueues
    from .server import TestServer

# Settings that point at the production tier: a test server has no replicas and no TLS.
SERVER_ONLY = ("OPTIONS", "CLUSTER", "DURABLE_ENQUEUE")


@pytest.fixture(scope="session")
def echomq_server() -> Iterator[TestServer]:
    """The test process's server (started on first use, stopped at the end of the session)."""
    from django.conf import settings

    from .server import start

    raw = getattr(settings, "ECHOMQ", {}) or {}
    server = start(raw.get("URL"), raw.get("OPTIONS"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def echomq(echomq_server: TestServer) -> Iterator[TestQueues]:
    """The test's queues: ``settings.ECHOMQ`` on the test server's database, flushed around it."""
    from django.conf import settings
    from django.test import override_settings

    from .. import conf
    from ..engine.nodes import flush_database
    from .queues import TestQueues

    raw = dict(getattr(settings, "ECHOMQ", {}) or {})
    if echomq_server.embedded is not None:
        for key in SERVER_ONLY:
            raw.pop(key, None)
    raw["URL"] = echomq_server.url
    with override_settings(ECHOMQ=raw):  # setting_changed: conf builds a new connector
        connector = conf.get_connector()
        flush_database(connector)
        try:
            yield TestQueues()
        finally:
            flush_database(connector)
