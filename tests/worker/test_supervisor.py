"""The worker as a supervisor: tasks in child processes, time limits, cancel, a clean stop.

Real worker processes (the engine's, ``engine_proc``), real children, real signals.
Each test failed on the worker before it: a GIL-holding task starved the heartbeat
(two workers ran one job), a hung task held its slot for ever and came back after
every restart, a running job could not be cancelled, and a short grace released a
job while its task still ran (another worker started it beside).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from echomq_django.engine.jobs import NewJob
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


def job(**spec) -> NewJob:
    fields = {k: spec.pop(k) for k in ("timeout_ms", "max_attempts") if k in spec}
    return NewJob(payload=json.dumps(spec), task="t", **fields)


def runs(log: Path) -> dict[str, list[dict]]:
    """The side log's lines by job, in order."""
    by_job: dict[str, list[dict]] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            rec = json.loads(line)
            by_job.setdefault(rec["job"], []).append(rec)
    return by_job


def overlaps(lines: list[dict]) -> list[tuple[int, int]]:
    """Pairs of processes whose executions of one job overlapped in time."""
    spans: dict[int, list[float]] = {}
    for rec in lines:
        spans.setdefault(rec["pid"], []).append(rec["t"])
    bounds = sorted((min(ts), max(ts), pid) for pid, ts in spans.items())
    return [(a[2], b[2]) for a, b in itertools.pairwise(bounds) if b[0] < a[1]]


def test_a_gil_holding_call_longer_than_the_lease_runs_once_in_process_mode(
    valkey_jobs, valkey_url, spawn
):
    """3 s in one C call holding the GIL, with a 1 s lease: the supervisor's heartbeat
    is in another process, so the lease holds and no second worker starts it."""
    jobs = valkey_jobs
    job_id = jobs.enqueue("q", job(gil=3)).id
    spawn("reaper", valkey_url, "q", "--interval", "0.05")
    for name in ("a", "b"):
        spawn("worker", valkey_url, "q", "--processes", "1", "--lease-ms", "1000", "--name", name)
    wait_until(lambda: jobs.get("q", job_id).state == "completed", timeout=30)
    row = jobs.get("q", job_id)
    assert (row.attempts, row.refunds, len(row.worker_ids), row.error_list) == (1, 0, 1, [])


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_a_hung_task_is_stopped_at_its_time_limit_and_its_slot_reused(
    valkey_jobs, valkey_url, spawn, mode
):
    """A task that never returns (an uninterruptible sleep), a 2 s time limit, one slot:
    stopped (thread mode abandons the stuck thread, process mode kills its child), it
    ends dead with TimeLimitExceeded, and the job behind it runs meanwhile."""
    jobs = valkey_jobs
    hung = jobs.enqueue("q", job(sleep=600, timeout_ms=2000, max_attempts=1)).id
    behind = jobs.enqueue("q", job(sleep=0)).id
    extra = ["--processes", "1"] if mode == "processes" else []
    worker = spawn("worker", valkey_url, "q", "--lease-ms", "2000", *extra)
    wait_until(lambda: jobs.get("q", hung).state == "dead", timeout=20)
    wait_until(lambda: jobs.get("q", behind).state == "completed", timeout=10)
    row = jobs.get("q", hung)
    assert [e["exception_class_path"] for e in row.error_list] == [
        "echomq_django.engine.errors.TimeLimitExceeded"
    ]
    assert row.last_error.startswith("TimeLimitExceeded")
    # Restarting the worker does not bring it back: it is dead for good.
    worker.send(signal.SIGTERM)
    assert worker.wait(10) == 0, worker.log()
    # Its event line says how long it ran (it said 0.0 ms: no handler returned).
    (ran_ms,) = re.findall(rf"job {hung} \S+ dead \((\d+(?:\.\d+)?) ms\)", worker.log())
    assert float(ran_ms) >= 1900, worker.log()
    spawn("worker", valkey_url, "q", *extra)
    time.sleep(0.5)
    assert jobs.get("q", hung).state == "dead"


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_a_stuck_run_past_its_time_limit_never_runs_beside_its_retry(
    valkey_jobs, valkey_url, spawn, mode
):
    """Process mode kills the stuck run's child, so the job is retried per its policy.
    Thread mode cannot stop the stuck thread: a retry would run beside it (before, the
    attempt that was abandoned at 3 s still ran when its retry began): it is not retried."""
    jobs = valkey_jobs
    job_id = jobs.enqueue("q", job(sleep=6, timeout_ms=1000, max_attempts=2)).id
    extra = ["--processes", "1"] if mode == "processes" else []
    spawn("worker", valkey_url, "q", "--lease-ms", "2000", *extra)
    wait_until(lambda: jobs.get("q", job_id).state == "dead", timeout=30)
    row = jobs.get("q", job_id)
    runs = 2 if mode == "processes" else 1
    assert (row.attempts, len(row.error_list)) == (runs, runs)
    assert {e["exception_class_path"] for e in row.error_list} == {
        "echomq_django.engine.errors.TimeLimitExceeded"
    }
    if mode == "threads":
        assert "not retried" in row.last_error


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_a_running_job_is_cancelled(valkey_jobs, valkey_url, spawn, tmp_path, mode):
    jobs = valkey_jobs
    log = tmp_path / "runs.jsonl"
    # Thread mode stops it by raising Cancelled in it (it must be in Python code, not a
    # C call, to see it); process mode kills its child if it does not end.
    job_id = jobs.enqueue("q", job(log=str(log), run=60)).id
    extra = ["--processes", "1"] if mode == "processes" else []
    spawn("worker", valkey_url, "q", "--lease-ms", "3000", *extra)
    wait_until(lambda: job_id in runs(log), timeout=20)
    assert jobs.cancel("q", job_id, "no longer needed") == "cancelling"
    asked = time.monotonic()
    wait_until(lambda: jobs.get("q", job_id).state == "dead", timeout=10)
    assert time.monotonic() - asked < 5
    row = jobs.get("q", job_id)
    assert row.error_list[-1]["exception_class_path"] == "echomq_django.engine.errors.Cancelled"
    assert row.last_error == "Cancelled: no longer needed"
    ticks = len(runs(log)[job_id])
    time.sleep(0.3)
    assert len(runs(log)[job_id]) == ticks, "the task still runs"


def test_sigterm_with_a_short_grace_never_overlaps_executions(
    valkey_jobs, valkey_url, spawn, tmp_path
):
    """Process mode, --grace 1 and a 3 s task: at grace expiry the child is killed
    *before* the job is released; the next worker's run starts after it, never beside."""
    jobs = valkey_jobs
    log = tmp_path / "runs.jsonl"
    job_id = jobs.enqueue("q", job(log=str(log), run=3)).id
    first = spawn("worker", valkey_url, "q", "--processes", "1", "--grace", "1")
    wait_until(lambda: job_id in runs(log), timeout=20)
    spawn("worker", valkey_url, "q", "--processes", "1", "--name", "second")
    first.send(signal.SIGTERM)
    assert first.wait(10) == 0, first.log()
    wait_until(lambda: jobs.get("q", job_id).state == "completed", timeout=20)
    lines = runs(log)[job_id]
    assert len({rec["pid"] for rec in lines}) == 2, lines[:3]
    assert overlaps(lines) == []
    row = jobs.get("q", job_id)
    assert (row.counted_attempts, row.error_list) == (1, [])  # released: not charged


def test_a_frozen_supervisors_child_stops_before_its_lease_lapses(
    valkey_jobs, valkey_url, spawn, tmp_path
):
    """SIGSTOP the supervisor mid-job, past the lease: its child, which runs on, stops
    itself before the lease lapses, so the second worker's run (the reaper hands the job
    out) never overlaps it; when the supervisor wakes, the job is charged nothing."""
    jobs = valkey_jobs
    log = tmp_path / "runs.jsonl"
    job_id = jobs.enqueue("q", job(log=str(log), run=3)).id
    first = spawn("worker", valkey_url, "q", "--processes", "1", "--lease-ms", "1000")
    wait_until(lambda: job_id in runs(log), timeout=20)
    first.send(signal.SIGSTOP)
    try:
        spawn("reaper", valkey_url, "q", "--interval", "0.05")
        spawn("worker", valkey_url, "q", "--processes", "1", "--lease-ms", "1000", "--name", "b")
        wait_until(lambda: len({rec["pid"] for rec in runs(log)[job_id]}) == 2, timeout=20)
        time.sleep(1.0)  # the second run goes on beside the frozen supervisor
    finally:
        first.send(signal.SIGCONT)
    wait_until(lambda: jobs.get("q", job_id).state == "completed", timeout=20)
    lines = runs(log)[job_id]
    assert overlaps(lines) == [], lines
    assert lines[0]["event"] == "start" and "end" not in [r["event"] for r in lines[:-1]]
    row = jobs.get("q", job_id)
    assert (row.crashes, row.counted_attempts, row.error_list) == (0, 1, [])
    wait_until(lambda: "stopping itself" in first.log(), timeout=10)
    assert first.popen.poll() is None  # it lives on, its child started again


def test_a_child_killed_with_sigkill_is_replaced_and_its_job_accounted(
    valkey_jobs, valkey_url, spawn, tmp_path
):
    jobs = valkey_jobs
    log = tmp_path / "runs.jsonl"
    job_id = jobs.enqueue("q", job(log=str(log), run=1)).id
    after = jobs.enqueue("q", job(sleep=0)).id
    worker = spawn("worker", valkey_url, "q", "--processes", "1")
    wait_until(lambda: job_id in runs(log), timeout=20)
    child = runs(log)[job_id][0]["pid"]
    assert child != worker.pid
    os.kill(child, signal.SIGKILL)  # an OOM kill, as the worker sees it
    wait_until(lambda: jobs.get("q", job_id).state == "completed", timeout=20)
    wait_until(lambda: jobs.get("q", after).state == "completed", timeout=10)
    row = jobs.get("q", job_id)
    # It ran alone in that child: the death is charged to it (1 of 3), it comes back
    # solo, and completes in a child of its own; the worker itself lived on.
    assert (row.crashes, row.solo, row.counted_attempts) == (1, True, 1)
    assert row.error_list[0]["exception_class_path"] == "echomq_django.engine.errors.WorkerCrashed"
    assert "SIGKILL" in row.error_list[0]["traceback"]
    assert worker.popen.poll() is None


@pytest.mark.django_db
@pytest.mark.parametrize("surface", ["admin", "cli"])
def test_cancel_of_a_running_job_from_the_admin_and_the_cli(
    valkey_jobs, valkey_url, spawn, tmp_path, surface, settings, django_user_model
):
    """The operator's Cancel (an admin POST with its CSRF-checked form, or `manage.py
    echomq cancel ID`) on a job a process-mode worker is running: it is stopped, dead."""
    jobs = valkey_jobs
    log = tmp_path / "runs.jsonl"
    job_id = jobs.enqueue("q", job(log=str(log), run=60)).id
    spawn("worker", valkey_url, "q", "--processes", "1")
    wait_until(lambda: job_id in runs(log), timeout=20)
    if surface == "admin":
        from django.test import Client

        from echomq_django import conf

        settings.ECHOMQ = {"URL": valkey_url, "QUEUES": ["q"]}
        conf.reset()
        client = Client()
        client.force_login(django_user_model.objects.create_superuser("op", "op@x.org", "pw"))
        page = client.post(f"/admin/echomq/queues/q/jobs/{job_id}/cancel/", follow=True)
        assert "its worker stops it" in page.content.decode()
        conf.reset()
    else:
        done = subprocess.run(
            [sys.executable, "-m", "django", "echomq", "cancel", job_id, "--queue", "q"],
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.worker.settings",
                 "ECHOMQ_TEST_URL": valkey_url, "PYTHONPATH": str(Path(__file__).parents[2])},
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "its worker stops it" in done.stdout
    wait_until(lambda: jobs.get("q", job_id).state == "dead", timeout=10)
    assert jobs.get("q", job_id).last_error.startswith("Cancelled")


def test_a_task_that_raises_in_a_child_process_is_retried_then_dead(valkey_jobs, valkey_url, spawn):
    """The failure travels from the child to the parent like a success: no child thread
    may die on it (its job would wait for ever, its lease renewed by the parent)."""
    jobs = valkey_jobs
    failing = jobs.enqueue("q", job(fail=True, max_attempts=2)).id
    after = jobs.enqueue("q", job(sleep=0)).id
    spawn("worker", valkey_url, "q", "--processes", "1", "--concurrency", "1")
    wait_until(lambda: jobs.get("q", failing).state == "dead", timeout=30)
    wait_until(lambda: jobs.get("q", after).state == "completed", timeout=30)
    row = jobs.get("q", failing)
    assert row.counted_attempts == 2 and row.crashes == 0
    assert [e["exception_class_path"] for e in row.error_list] == ["builtins.RuntimeError"] * 2
