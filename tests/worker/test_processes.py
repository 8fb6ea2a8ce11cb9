"""Real worker and reaper processes, killed for real: nothing is lost, nothing runs twice.

The engine-level processes (``engine_proc.py``) run the same Worker/Reaper and the
same signal handling as ``runworker``/``runreaper``; ``test_commands.py`` runs
the commands themselves.
"""

from __future__ import annotations

import json
import random
import signal
import time

import pytest

from echomq_django.devserver import EmbeddedServer
from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs, NewJob
from tests import servers
from tests.worker.conftest import wait_until

pytestmark = pytest.mark.slow


def sleeper(seconds: float, **fields) -> NewJob:
    return NewJob(payload=json.dumps({"sleep": seconds}), task="sleep", **fields)


def assert_exits(proc, code: int, within: float) -> None:
    try:
        assert proc.wait(within) == code, proc.log()
    except Exception:
        print(proc.log())
        raise


def test_a_worker_killed_mid_job_delays_it_by_one_lease(valkey_jobs, valkey_url, spawn):
    jobs = valkey_jobs
    job_id = jobs.enqueue("q", sleeper(0.3)).id
    first = spawn("worker", valkey_url, "q", "--name", "first", "--lease-ms", "500")
    wait_until(lambda: jobs.get("q", job_id).worker == "first")
    first.kill()  # SIGKILL mid-job: no release, no goodbye
    killed_at = time.monotonic()
    spawn("reaper", valkey_url, "q", "--interval", "0.05")
    spawn("worker", valkey_url, "q", "--name", "second", "--lease-ms", "500")
    wait_until(lambda: jobs.get("q", job_id).state == "completed", timeout=10)
    recovered_after = time.monotonic() - killed_at
    job = jobs.get("q", job_id)
    assert job.attempts == 2 and job.worker_ids == ("first", "second")
    # Its worker died while it ran (perhaps beside others): no attempt spent, no error
    # recorded; it came back solo and ran alone.
    assert (job.counted_attempts, job.error_list, job.solo, job.crashes) == (1, [], True, 0)
    assert json.loads(job.result)["pid"] != first.pid  # solo: in a child of the second worker
    assert 0.2 < recovered_after < 5  # within about one lease (the rest of it) plus the job


def test_a_job_three_leases_long_completes_once_and_is_never_taken(valkey_jobs, valkey_url, spawn):
    jobs = valkey_jobs
    job_id = jobs.enqueue("q", sleeper(0.9)).id
    spawn("reaper", valkey_url, "q", "--interval", "0.05")
    spawn("worker", valkey_url, "q", "--name", "holder", "--lease-ms", "300")
    wait_until(lambda: jobs.get("q", job_id).state == "active")
    spawn("worker", valkey_url, "q", "--name", "rival", "--lease-ms", "300")
    wait_until(lambda: jobs.get("q", job_id).state == "completed", timeout=10)
    job = jobs.get("q", job_id)
    assert (job.attempts, job.worker_ids, job.error_list) == (1, ("holder",), [])
    assert jobs.stats("q").metrics.get("reaped", 0) == 0


def test_two_reapers_four_workers_and_stalls_lose_nothing(valkey_jobs, valkey_url, spawn):
    """2,000 jobs of 0-600 ms on a 300 ms lease; workers are frozen (SIGSTOP) now and then.

    A frozen worker cannot renew its leases: the reapers return its jobs, others
    take them, and when it thaws the fence refuses its late completes (counted as
    stale or lost by that worker). Every job still ends completed or dead, exactly once.
    """
    jobs = valkey_jobs
    total, lease = 2000, 300
    rng = random.Random(7)
    jobs.enqueue_many("q", [sleeper(rng.uniform(0, 2 * lease) / 1000) for _ in range(total)])
    for _ in range(2):
        spawn("reaper", valkey_url, "q", "--interval", "0.05")
    workers = [
        spawn("worker", valkey_url, "q", "--name", f"w{i}", "--lease-ms", str(lease),
              "--concurrency", "25")
        for i in range(4)
    ]  # fmt: skip

    def finished() -> int:
        counts = jobs.stats("q").counts
        return counts["completed"] + counts["dead"]

    def holds_jobs(name: str) -> bool:
        page = jobs.page("q", "active", count=500, fields=("worker",))
        return any(entry.fields["worker"] == name for entry in page.entries)

    for i in range(3):  # freeze three workers in turn, each while it holds leases
        wait_until(lambda i=i: holds_jobs(f"w{i}"), timeout=20, step=0.005)
        workers[i].send(signal.SIGSTOP)
        time.sleep(3 * lease / 1000)
        workers[i].send(signal.SIGCONT)
    wait_until(lambda: finished() == total, timeout=90, step=0.1)
    for proc in workers:
        proc.send(signal.SIGTERM)
    for proc in workers:
        assert_exits(proc, 0, within=10)

    stats = [proc.stats() for proc in workers]
    queue = jobs.stats("q")
    assert queue.counts == {"pending": 0, "scheduled": 0, "active": 0,
                            "completed": queue.counts["completed"], "dead": queue.counts["dead"]}  # fmt: skip
    assert queue.metrics["completed"] == queue.counts["completed"]  # no job completed twice
    assert sum(s["completed"] for s in stats) == queue.counts["completed"]
    assert queue.metrics.get("reaped", 0) > 0
    assert sum(s["stale"] + s["lost"] for s in stats) > 0  # the thawed zombies were refused


def test_workers_ride_through_a_server_restart(spawn, tmp_path):
    server = EmbeddedServer(binary=servers.valkey_binary(), appendonly=True).start()
    try:
        jobs = Jobs(Connector.from_url(server.url))
        total = 300
        jobs.enqueue_many("q", [sleeper(0.01) for _ in range(total)])
        spawn("reaper", server.url, "q", "--interval", "0.1")
        workers = [
            spawn("worker", server.url, "q", "--lease-ms", "2000", "--concurrency", "4")
            for _ in range(2)
        ]
        wait_until(lambda: jobs.stats("q").counts["completed"] >= total // 3, timeout=20)
        server.restart()
        wait_until(lambda: jobs.stats("q").counts["completed"] == total, timeout=30, step=0.1)
        for proc in workers:
            assert proc.popen.poll() is None, proc.log()
            proc.send(signal.SIGTERM)
        for proc in workers:
            assert_exits(proc, 0, within=10)
        assert any("lost the server" in proc.log() for proc in workers)
        assert sum(proc.stats()["completed"] for proc in workers) <= total
        jobs.connector.close()
    finally:
        server.stop()
