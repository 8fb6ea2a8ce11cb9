"""Fixtures of the fault tests: a fault proxy in front of the suite's server.

direct   Jobs on the server itself (sets up state, reads the truth)
proxy    FaultProxy forwarding to the server (started per test)
proxied  Jobs whose every call crosses the proxy, with a short socket timeout
"""

from __future__ import annotations

import pytest

from echomq_django.engine import script
from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs
from tests.support.proxy import FaultProxy

SOCKET_TIMEOUT_S = 0.3


@pytest.fixture
def direct(connector) -> Jobs:
    for s in script.all_scripts():  # loaded up front: a fault must hit the transition itself
        connector.load(s)
    return Jobs(connector)


@pytest.fixture
def proxy(server):
    with FaultProxy(server.host, server.port) as p:
        yield p


@pytest.fixture
def proxied(proxy, direct) -> Jobs:
    conn = Connector.from_url(proxy.url, socket_timeout=SOCKET_TIMEOUT_S)
    yield Jobs(conn)
    conn.close()
