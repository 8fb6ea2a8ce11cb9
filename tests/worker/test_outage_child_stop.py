"""A server back in time meets a supervisor's renewal before its child must stop.

A supervised child stops itself a margin before its leases lapse unrenewed
(``board.stop_by``: a quarter of the lease, at most 1 s), so a frozen or cut-off
supervisor never leaves runs going on lapsed leases. While the server is away the
keeper's renewals back off; the wait must end before that stop, not merely before
the lease's end, or a server that is back in time still sees the child stop itself
and its jobs run again.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from echomq_django.engine.jobs import NewJob
from tests.support.proxy import FaultProxy
from tests.support.waiting import wait_until
from tests.worker.test_outage_backoff import Refuser

Q = "stop"
LEASE_S = 4.0  # renewed every second while it runs; its child stops 1 s before its end


class Renewals:
    """Watches the job's lease on the server: when it was last moved (monotonic)."""

    def __init__(self, client: redis.Redis, job_id: str) -> None:
        self._client, self._job_id = client, job_id
        self.last_at = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        deadline = None
        while not self._done.is_set():
            now = self._client.zscore(f"emq:{{{Q}}}:active", self._job_id)
            if now is not None and now != deadline:
                deadline, self.last_at = now, time.monotonic()
            time.sleep(0.005)

    def next(self, timeout: float = 5.0) -> float:
        """Wait for the next renewal; when it was seen."""
        seen = self.last_at
        wait_until(lambda: self.last_at != seen, timeout=timeout)
        return self.last_at

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


@pytest.fixture
def client(valkey_server) -> Iterator[redis.Redis]:
    client = redis.Redis(host=valkey_server.host, port=valkey_server.port)
    yield client
    client.close()


def test_a_server_back_before_the_childs_stop_keeps_its_run(
    valkey_jobs, valkey_server, client, spawn
):
    jobs = valkey_jobs
    proxy = FaultProxy(valkey_server.host, valkey_server.port).start()
    refuser = Refuser()
    job_id = jobs.enqueue(Q, NewJob(payload=json.dumps({"sleep": 8}))).id
    worker = spawn(
        "worker", proxy.url, Q, "--processes", "1", "--lease-ms", str(int(LEASE_S * 1000))
    )
    renewals = Renewals(client, job_id)
    try:
        wait_until(lambda: jobs.stats(Q).counts["active"] == 1, timeout=20)
        renewed = renewals.next()
        time.sleep(max(0.0, renewed + 0.85 - time.monotonic()))  # before the next renewal
        proxy.target = refuser.address
        proxy.cut_all()
        stop_at = renewed + LEASE_S - 1.0  # when the child stops unless renewed
        tries, back_at = refuser.accepted, None
        while time.monotonic() < stop_at - 0.05:
            if refuser.accepted != tries:  # the keeper tried (the child, busy, claims not)
                tries = refuser.accepted
                if time.monotonic() >= stop_at - 0.4:
                    break
            time.sleep(0.002)
        proxy.target = (valkey_server.host, valkey_server.port)  # the server is back
        back_at = stop_at - time.monotonic()
        wait_until(lambda: jobs.get(Q, job_id).state == "completed", timeout=30)
        row = jobs.get(Q, job_id)
        log = worker.log()
        assert "stopping itself" not in log and row.attempts == 1, (
            f"the server was back {back_at:.2f} s before the child's stop\n{log}"
        )
    finally:
        renewals.stop()
        proxy.close()
        refuser.close()
