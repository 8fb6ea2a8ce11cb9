"""Error replies that say "not run" are an outage to ride out, never a failure.

BUSY (another client's script is running), MASTERDOWN, NOREPLICAS, and a NOSCRIPT
met again after the connector reloaded the script (the cache flushed once more) all
mean the call did not run and may later. They were a permanent ``ScriptError``: a
worker dropped a finished job's completion (or its failure) on one, the job waited
out its lease and ran a second time. A review reproduced both: one busy script, and
a SCRIPT FLUSH every 10 ms (373 duplicate runs in 2,000 jobs).
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
import redis

from echomq_django.engine.connector import translate_error
from echomq_django.engine.errors import ServerUnavailable
from echomq_django.engine.worker import Success, Worker

from .conftest import QUEUE, WORKER, enqueue_n, row


@pytest.mark.parametrize(
    "reply",
    [
        redis.exceptions.NoScriptError("No matching script. Please use EVAL."),
        redis.ResponseError("BUSY Valkey is busy running a script. You can only call SCRIPT KILL"),
        redis.ResponseError("MASTERDOWN Link with MASTER is down"),
        redis.ResponseError("NOREPLICAS Not enough good replicas to write."),
    ],
    ids=["noscript", "busy", "masterdown", "noreplicas"],
)
def test_a_not_run_reply_is_server_unavailable(reply):
    assert isinstance(translate_error(reply), ServerUnavailable)


def test_a_completion_that_meets_a_busy_server_is_sent_again_and_lands_once(jobs, standalone):
    """A real BUSY: another client's script loops; the complete is refused, not lost."""
    (job_id,) = enqueue_n(jobs, 1)
    (c,) = jobs.claim(QUEUE, WORKER, count=1).jobs
    admin = redis.Redis.from_url(standalone.url)
    admin.config_set("busy-reply-threshold", 50)

    def loop_forever() -> None:  # ended by SCRIPT KILL, which fails it
        with contextlib.suppress(redis.ResponseError):
            redis.Redis.from_url(standalone.url).eval("while true do end", 0)

    looping = threading.Thread(target=loop_forever, daemon=True)
    looping.start()
    try:
        time.sleep(0.2)  # past the threshold: the server answers BUSY
        with pytest.raises(ServerUnavailable, match="BUSY"):
            jobs.complete(QUEUE, job_id, c.token)
    finally:
        admin.script_kill()
        looping.join(10)
        admin.config_set("busy-reply-threshold", 5000)
    jobs.complete(QUEUE, job_id, c.token)
    assert row(jobs, job_id)["state"] == "completed"


def test_a_worker_under_a_script_flush_storm_runs_each_job_once(jobs, standalone):
    ids = enqueue_n(jobs, 400)
    runs: dict[str, int] = {}
    lock = threading.Lock()

    def handler(claimed):
        with lock:
            runs[claimed.id] = runs.get(claimed.id, 0) + 1
        return Success("null")

    flusher = redis.Redis.from_url(standalone.url)
    stop = threading.Event()

    def flush_storm() -> None:
        while not stop.is_set():
            flusher.script_flush()
            time.sleep(0.003)

    storm = threading.Thread(target=flush_storm, daemon=True)
    storm.start()
    worker = Worker(jobs, [QUEUE], handler, burst=True, concurrency=4, lease_ms=30_000,
                    grace_s=5.0)  # fmt: skip
    done = threading.Thread(target=worker.run, daemon=True)
    done.start()
    try:
        done.join(120)
        assert not done.is_alive(), "the burst did not end"
    finally:
        stop.set()
        worker.stop()
        storm.join(5)
    assert {job_id: runs.get(job_id) for job_id in ids} == dict.fromkeys(ids, 1)
    assert {row(jobs, job_id)["state"] for job_id in ids} == {"completed"}
