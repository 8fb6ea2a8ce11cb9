"""``runworker`` and ``runreaper`` through a crash and restart of their server.

The server has a password and an AOF fsynced on every write (``appendfsync always``),
so what it acknowledged survives its SIGKILL. Both processes must ride the outage out
on their own (no restart of theirs), each saying once that the server is lost and once
that it is back, never printing the password; every job, enqueued before or after,
runs exactly once.
"""

from __future__ import annotations

import time

import pytest

from echomq_django import conf
from echomq_django.compat import TaskResultStatus
from echomq_django.devserver import EmbeddedServer
from tests.support.waiting import wait_until
from tests.worker import settings as worker_settings
from tests.worker import tasks

pytestmark = [pytest.mark.django_db, pytest.mark.slow]
SECRET = "Restart-Secret-7781"


@pytest.fixture
def aof_server(valkey_server):
    server = EmbeddedServer(
        binary=valkey_server.binary,
        appendonly=True,
        password=SECRET,
        extra_args=["--appendfsync", "always"],
    ).start()
    yield server
    server.stop()


def succeeded(results) -> int:
    for result in results:
        result.refresh()
    return sum(result.status == TaskResultStatus.SUCCESSFUL for result in results)


def test_runworker_and_runreaper_ride_out_a_server_crash_and_restart(settings, aof_server, spawn):
    url = aof_server.url
    settings.ECHOMQ = {"URL": url}
    settings.TASKS = worker_settings.TASKS
    conf.reset()
    try:
        before = [tasks.nap.enqueue(0.3) for _ in range(10)]
        worker = spawn("runworker", url, "slow", "--lease", "3", "-c", "2")
        reaper = spawn("runreaper", url, "--interval", "0.2")
        wait_until(lambda: succeeded(before) >= 2, timeout=30)
        aof_server.kill()  # jobs run meanwhile: their completions meet the outage
        time.sleep(2)  # the outage: both processes back off (the server is gone)
        aof_server.start()
        after = [tasks.nap.enqueue(0.05) for _ in range(10)]
        wait_until(lambda: succeeded(before + after) == 20, timeout=60)
        jobs = conf.get_jobs()
        assert {jobs.get("slow", r.id).attempts for r in before + after} == {1}
        assert worker.popen.poll() is None and reaper.popen.poll() is None
        for proc in (worker, reaper):
            log = proc.log()
            assert SECRET not in log
            assert "Traceback" not in log, log
            assert log.count("lost the server") == 1, log
            assert log.count("the server is back after") == 1, log
    finally:
        conf.reset()
