"""A cancelled job whose task goes on: its lease is not renewed again.

The server refuses every renewal of a cancelled job (EMQCANCEL). A thread-mode worker
cannot end a task that swallows Cancelled (or sits in a C call); before, its heartbeat
asked again on every beat, about 60 extends a second for as long as the task ran. Now
the lease runs out, the reaper sends the job to dead as cancelled, and the task's late
outcome is discarded by the fence.
"""

from __future__ import annotations

import json
import threading
import time

from echomq_django.engine.errors import Cancelled
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.worker import Success
from tests.support.waiting import wait_until


def evalsha_calls(client) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def test_a_cancel_the_task_ignores_is_not_renewed_again(jobs, start_worker, redis_client):
    job_id = jobs.enqueue("q", NewJob(payload="1", task="t")).id
    ignored, release = threading.Event(), threading.Event()

    def stubborn(claimed):
        while not release.is_set():
            try:
                time.sleep(0.01)
            except Cancelled:
                ignored.set()  # and goes on
        return Success('"late"')

    worker = start_worker(stubborn, concurrency=1)  # lease_ms=1000: renewed every ~0.33 s
    wait_until(lambda: jobs.get("q", job_id).state == "active", timeout=10)
    assert jobs.cancel("q", job_id, "no longer needed") == "cancelling"
    wait_until(ignored.is_set, timeout=10)

    before = evalsha_calls(redis_client)
    wait_until(lambda: lease_ran_out(redis_client, job_id), timeout=10)  # not renewed
    window_calls = evalsha_calls(redis_client) - before
    # A registry refresh or an event batch; before, ~60 extends a second.
    assert window_calls < 10, window_calls

    assert jobs.reap("q").dead == 1
    row = jobs.get("q", job_id)
    assert (row.state, row.last_error) == ("dead", "Cancelled: no longer needed")
    release.set()
    worker.stop()
    row = jobs.get("q", job_id)
    assert (row.state, row.result) == ("dead", None), "the late outcome was discarded"


def lease_ran_out(client, job_id: str) -> bool:
    """The job's lease deadline is past on the server's clock (read without a script)."""
    deadline = client.zscore("emq:{q}:active", job_id)
    seconds, micros = client.time()
    return deadline is not None and deadline < seconds * 1000 + micros / 1000


def test_a_cancel_in_process_mode_spares_the_jobs_beside_it(valkey_jobs, valkey_url, spawn):
    """A child runs two jobs; one is cancelled and does not stop (its sleep is one C
    call). Its lease is renewed no more, but the child must not stop itself for it: it
    did when the board's stamp (vouched by that lease's last renewal) ran out, ~0.4 s
    after the cancel, taking the job beside it down mid-run, to run again. The
    cancelled run is the supervisor's to kill after the hard grace (2 s), by which
    time the job beside it (1.5 s) has ended."""
    jobs = valkey_jobs
    cancelled = jobs.enqueue("p", NewJob(payload=json.dumps({"sleep": 4}))).id
    beside = jobs.enqueue("p", NewJob(payload=json.dumps({"sleep": 1.5}))).id
    worker = spawn("worker", valkey_url, "p", "--processes", "1", "--concurrency", "2")
    wait_until(lambda: jobs.stats("p").counts["active"] == 2, timeout=20)
    time.sleep(0.3)  # both run (lease_ms=1000)
    assert jobs.cancel("p", cancelled, "no longer needed") == "cancelling"
    wait_until(lambda: jobs.get("p", beside).state == "completed", timeout=20)
    wait_until(lambda: jobs.get("p", cancelled).state == "dead", timeout=20)
    assert jobs.get("p", beside).attempts == 1, worker.log()
    assert jobs.get("p", cancelled).last_error.startswith("Cancelled"), worker.log()
    assert "stopping itself" not in worker.log()
