"""A finished job's completion survives a half-open connection at shutdown.

The worker's connections freeze (bytes stop flowing, the sockets stay open: what a
failover or a network cut can leave behind) after the job started and before it
returns; then the worker is stopped. The completion sent on the frozen wire is never
answered: the worker sends it again on a fresh connection (complete is idempotent
for its token), within the grace, and exits within the grace, whatever the socket
timeout. With ``--processes`` the child that only flushes its completion is not
killed with its job released (which would run it again).
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.runworker.conftest import django_jobs  # noqa: F401
from tests.support.proxy import FaultProxy
from tests.support.waiting import wait_until
from tests.worker import tasks

pytestmark = pytest.mark.django_db

GRACE_S = 3.0
NAP_S = 1.0


@pytest.mark.parametrize("procs", ["1", "2"])
def test_a_finished_job_survives_a_frozen_connection_at_shutdown(
    django_jobs,  # noqa: F811
    valkey_server,
    spawn,
    tmp_path,
    procs,
):
    with FaultProxy(valkey_server.host, valkey_server.port) as proxy:
        started, finished = tmp_path / "started", tmp_path / "finished"
        result = tasks.nap.enqueue(NAP_S, str(started), str(finished))
        args = ["slow", "--grace", f"{GRACE_S:g}"]
        if procs != "1":
            args += ["--processes", procs]
        worker = spawn("runworker", proxy.url, *args)
        wait_until(started.exists, timeout=30)
        # Freeze every live connection while the job runs: its completion goes out on
        # a connection that never answers.
        assert proxy.freeze() > 0
        wait_until(finished.exists, timeout=30)  # it returned: its completion is on its way
        signalled = time.monotonic()
        worker.send(signal.SIGTERM)
        code = worker.wait(GRACE_S + 30)
        took = time.monotonic() - signalled
        log = worker.log()
        assert code == 0, log
        job = django_jobs.get("slow", result.id)
        assert (job.state, job.refunds) == ("completed", 0), log
        assert "still running jobs" not in log and "released back" not in log, log
        assert took < GRACE_S + 4, log
