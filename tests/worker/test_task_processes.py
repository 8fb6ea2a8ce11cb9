"""Processes a task starts: they die with its run, and never keep a worker waiting.

Real worker processes (the engine's, ``engine_proc``), real forks, real signals. Each
test failed on the worker before it: the supervisor learnt of a child's death only at
the EOF of its reports, which a task's fork held open (a time-limit kill went unnoticed,
a SIGTERM's stop waited for the fork); a child was killed alone, its task's processes
ran on (beside the job's next run), also after a SIGKILL of the supervisor; and a
child's SIGTERM, ignored, was ignored by every process its tasks started.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from tests.support.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc"),
]


def job(**spec) -> NewJob:
    fields = {k: spec.pop(k) for k in ("timeout_ms", "max_attempts") if k in spec}
    return NewJob(payload=json.dumps(spec), task="t", **fields)


def forked(pids: Path) -> int:
    """The pid of the process the task forked, once it wrote it."""
    text = wait_until(lambda: pids.exists() and pids.read_text().strip(), timeout=20)
    return int(text.splitlines()[0])


def solo(jobs: Jobs, job_id: str) -> None:
    """Make the job solo (as a job running when its worker died): thread mode runs it in
    its solo child."""
    jobs.connector.client.hset(QueueKeys.of("q").job(job_id), "solo", "1")


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def gone(pid: int) -> bool:
    """No such process, or a zombie (dead, its new parent not yet reaping it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def test_a_task_that_forks_is_killed_with_its_fork_at_its_time_limit(
    valkey_jobs, valkey_url, spawn, tmp_path
):
    """1 s time limit, the task waits for a fork sleeping 60 s: the child is killed 2 s
    after the soft stop, its fork with it, and the job is dead at once (it ended only
    when the fork did, 60 s later; its lease lapsed meanwhile and the reaper gave it out)."""
    jobs = valkey_jobs
    pids = tmp_path / "pids"
    job_id = jobs.enqueue("q", job(fork=60, pids=str(pids), timeout_ms=1000, max_attempts=1)).id
    after = jobs.enqueue("q", job(sleep=0)).id
    spawn("worker", valkey_url, "q", "--processes", "1", "--lease-ms", "2000")
    fork = forked(pids)
    started = time.monotonic()
    wait_until(lambda: jobs.get("q", job_id).state == "dead", timeout=15)
    assert time.monotonic() - started < 8
    assert gone(fork)
    row = jobs.get("q", job_id)
    assert row.last_error == "TimeLimitExceeded: its process was killed 2s after"
    wait_until(lambda: jobs.get("q", after).state == "completed", timeout=20)  # child restarted


def test_a_stop_past_its_grace_kills_a_task_that_forks_and_ends_on_time(
    valkey_jobs, valkey_url, spawn, tmp_path
):
    jobs = valkey_jobs
    pids = tmp_path / "pids"
    job_id = jobs.enqueue("q", job(fork=60, pids=str(pids))).id
    worker = spawn("worker", valkey_url, "q", "--processes", "1", "--grace", "1")
    fork = forked(pids)
    worker.send(signal.SIGTERM)
    assert worker.wait(10) == 0, worker.log()  # it waited for the fork (60 s)
    assert gone(fork)
    row = jobs.get("q", job_id)
    assert (row.state, row.counted_attempts, row.error_list) == ("pending", 0, [])  # free


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_what_a_task_started_dies_with_a_sigkilled_worker(
    valkey_jobs, valkey_url, spawn, tmp_path, mode
):
    """A SIGKILL of the worker kills its children (PR_SET_PDEATHSIG), and now what their
    tasks started too: they ran on beside the job's next run. Thread mode: the job is
    solo, so it runs in the solo child."""
    jobs = valkey_jobs
    pids = tmp_path / "pids"
    spec = job(fork=60, pids=str(pids))
    extra = ["--processes", "1"] if mode == "processes" else []
    job_id = jobs.enqueue("q", spec).id
    if mode == "threads":
        solo(jobs, job_id)
    worker = spawn("worker", valkey_url, "q", *extra)
    fork = forked(pids)
    assert parent(parent(fork)) == worker.pid  # the task ran in a child of the worker
    worker.kill()
    wait_until(lambda: gone(fork), timeout=5)


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_the_processes_a_task_starts_obey_sigterm(valkey_jobs, valkey_url, spawn, mode):
    """A child ignored SIGTERM with SIG_IGN, which exec keeps: `Popen.terminate()` in a
    task did nothing in process mode (and in a solo child)."""
    jobs = valkey_jobs
    job_id = jobs.enqueue("q", job(term=True)).id
    if mode == "threads":
        solo(jobs, job_id)
    extra = ["--processes", "1"] if mode == "processes" else []
    spawn("worker", valkey_url, "q", *extra)
    wait_until(lambda: jobs.get("q", job_id).state == "completed", timeout=20)
    assert json.loads(jobs.get("q", job_id).result) == {"terminated": [-15, -15]}
