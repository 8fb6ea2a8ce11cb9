"""A worker holding leases while its server is away backs off like every other loop.

The server goes away (a restart, a failover) while a job runs: each renewal fails.
The worker must not try again ten times a second for the whole outage (a fleet of
workers would hammer a server that is loading its data), yet its renewals must not
wait so long that a lease runs out while the server is back. The server here is a
fault proxy whose upstream is a listener that accepts each connection and closes it
at once: every try of the worker shows up as one accepted connection.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.worker import Success
from tests.support.proxy import FaultProxy
from tests.support.running import worker_starter
from tests.support.waiting import wait_until

Q = "away"
OUTAGE_S = 4.0


class Refuser:
    """A listener that closes every connection it accepts, counting them: a server
    that is down as its clients see it (each try costs one connection)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self._listener.getsockname()[1])

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def away(server, server_kind) -> Iterator[tuple[FaultProxy, Refuser]]:
    """A fault proxy to the server, and the refuser it can be pointed at instead."""
    if server_kind == "redis":  # the server is away for most of the test: which one is moot
        pytest.skip("run on Valkey (the server is away: its kind adds only time)")
    proxy = FaultProxy(server.host, server.port).start()
    refuser = Refuser()
    yield proxy, refuser
    proxy.close()
    refuser.close()


def tries_during_an_outage(away: tuple[FaultProxy, Refuser], server) -> int:
    """Take the server away for OUTAGE_S, then bring it back: the tries meanwhile."""
    proxy, refuser = away
    proxy.target = refuser.address  # the server is gone: every try is refused
    proxy.cut_all()
    wait_until(lambda: refuser.accepted)
    threading.Event().wait(OUTAGE_S)
    tries = refuser.accepted
    proxy.target = (server.host, server.port)  # the server is back
    return tries


# The outage policy's waits (FIRST_BACKOFF_S, then a quarter of the time gone) allow 11
# tries in 4 s to one loop; renewals every 0.1 s made 30 and more.
MOST_TRIES = 4 * OUTAGE_S


def test_a_worker_holding_a_lease_backs_off_while_the_server_is_away(jobs, server, away):
    proxy, _ = away
    release = threading.Event()
    proxied = Jobs(Connector.from_url(proxy.url, socket_timeout=0.5))
    try:
        job_id = jobs.enqueue(Q, NewJob(payload="1")).id

        def handler(claimed):
            release.wait(30)
            return Success('"ok"')

        with worker_starter(proxied, (Q,), lease_ms=30_000) as start:
            start(handler, concurrency=1, idle_block_s=0.5)
            wait_until(lambda: jobs.stats(Q).counts["active"] == 1)
            tries = tries_during_an_outage(away, server)
            release.set()
            wait_until(lambda: jobs.stats(Q).counts["completed"] == 1, timeout=20)
        assert tries <= MOST_TRIES, f"{tries} tries in {OUTAGE_S:g} s"
        assert jobs.get(Q, job_id).attempts == 1, "the lease held through the outage"
    finally:
        release.set()
        proxied.connector.close()


@pytest.mark.slow
def test_a_supervisor_holding_a_childs_lease_backs_off_while_the_server_is_away(
    jobs, server, away, spawn
):
    proxy, _ = away
    job_id = jobs.enqueue(Q, NewJob(payload=json.dumps({"sleep": OUTAGE_S + 2}))).id
    worker = spawn("worker", proxy.url, Q, "--processes", "1", "--lease-ms", "30000")
    wait_until(lambda: jobs.stats(Q).counts["active"] == 1, timeout=20)
    tries = tries_during_an_outage(away, server)
    wait_until(lambda: jobs.stats(Q).counts["completed"] == 1, timeout=20)
    assert tries <= MOST_TRIES, f"{tries} tries in {OUTAGE_S:g} s\n{worker.log()}"
    assert jobs.get(Q, job_id).attempts == 1, "the lease held through the outage"
