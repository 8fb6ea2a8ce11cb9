"""Text from task code is always storable, and what a row keeps of it is bounded.

A lone surrogate in an exception message (common from ``os.fsdecode`` file names)
used to make the failure unrecordable (the lease was forgotten, the real error lost,
the job dead as LeaseExpired); a 32 MiB message, four attempts, grew the row's
errors to 128 MiB and one retry script ran for seconds, blocking every client.
"""

from __future__ import annotations

import json

from echomq_django.engine.jobs import NewJob
from echomq_django.engine.outcome import ERROR_TEXT_MAX
from echomq_django.engine.retry_policy import RetryPolicy
from echomq_django.engine.worker import Worker

HUGE = 32 * 1024 * 1024


def run_failing(jobs, message: str, attempts: int):
    job_id = jobs.enqueue("q", NewJob(payload="{}", max_attempts=attempts)).id

    def handler(claimed):
        raise ValueError(message)

    Worker(jobs, ["q"], handler, burst=True, retry_policy=RetryPolicy(base_ms=0)).run()
    return jobs.get("q", job_id)


def test_a_lone_surrogate_in_the_message_is_recorded(valkey_jobs):
    job = run_failing(valkey_jobs, "no such file: caf\udce9.txt", attempts=1)
    assert job.state == "dead"
    assert job.last_error == "ValueError: no such file: caf\\udce9.txt"
    (error,) = job.error_list
    assert error["exception_class_path"] == "builtins.ValueError"
    assert "caf\\udce9.txt" in error["traceback"]


def test_huge_messages_leave_a_bounded_row(valkey_jobs):
    valkey_jobs.connector.client.slowlog_reset()
    job = run_failing(valkey_jobs, "x" * HUGE, attempts=6)
    assert (job.state, job.counted_attempts) == ("dead", 6)
    assert len(job.errors) <= 64 * 1024
    errors = job.error_list
    assert 1 <= len(errors) < 6  # the newest kept in full, the oldest dropped and counted
    dropped = int(valkey_jobs.connector.client.hget(f"emq:{{q}}:job:{job.id}", "errors_dropped"))
    assert dropped + len(errors) == 6
    for error in errors:
        assert len(error["traceback"]) <= ERROR_TEXT_MAX + 100
        assert "characters cut" in error["traceback"]
    assert len(job.last_error) <= 500
    slow = [
        e
        for e in valkey_jobs.connector.client.slowlog_get(128)
        if e["duration"] > 100_000 and b"{q}" in e["command"]
    ]
    assert not slow, slow  # no script of this queue ran past 100 ms


def test_a_record_from_another_caller_is_refused_past_its_bound(valkey_jobs):
    from echomq_django.engine.errors import InvalidJobOptions

    jobs = valkey_jobs
    job_id = jobs.enqueue("q", NewJob(payload="{}")).id
    (claimed,) = jobs.claim("q", "w").jobs
    big = json.dumps({"exception_class_path": "x", "traceback": "y" * 70_000})
    try:
        jobs.retry("q", job_id, claimed.token, error=big, summary="x")
    except InvalidJobOptions as exc:
        assert "over the limit" in str(exc)
    else:
        raise AssertionError("a 70 kB record was accepted")
    assert jobs.get("q", job_id).state == "active"  # nothing changed
