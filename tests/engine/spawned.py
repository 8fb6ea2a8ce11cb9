"""Code that the invariant tests run in other processes (spawned: a fresh interpreter).

Kept apart from the test modules so that a spawned child imports only this and
the engine, not pytest's fixtures.
"""

from __future__ import annotations

import time
from typing import Any

from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs, NewJob


def claim_until_empty(
    url: str, queue: str, worker: str, count: int, start: Any
) -> list[tuple[str, int]]:
    """Claim batches until the queue is empty; return every (id, token) this process got.

    ``start`` is a multiprocessing Event: all processes begin together, so the
    claims really race.
    """
    jobs = Jobs(Connector.from_url(url))
    jobs.connector.ping()
    start.wait()
    got: list[tuple[str, int]] = []
    while True:
        batch = jobs.claim(queue, worker, count=count, lease_ms=600_000).jobs
        if not batch:
            return got
        got.extend((c.id, c.token) for c in batch)


def claim_and_hang(url: str, queue: str, lease_ms: int, claimed: Any) -> None:
    """Claim one job, say so, and hang until killed: a worker that dies mid-job."""
    jobs = Jobs(Connector.from_url(url))
    jobs.claim(queue, "doomed", lease_ms=lease_ms, start_now=1)  # it started running
    claimed.set()
    time.sleep(600)


def shifted_clock_session(url: str, queue: str, shift_s: float, lease_ms: int) -> dict[str, Any]:
    """Run a claim, an extend and a retry with this process's clock ``shift_s`` off.

    ``time.time`` and ``time.time_ns`` are patched (as libfaketime would) before
    the engine is used. Returns what the engine stored, the server's TIME around
    each call, and the shifted client clock, all in ms.
    """
    real_time, real_time_ns = time.time, time.time_ns
    time.time = lambda: real_time() + shift_s
    time.time_ns = lambda: real_time_ns() + int(shift_s * 1e9)

    jobs = Jobs(Connector.from_url(url))

    def server_ms() -> int:
        seconds, micros = jobs.connector.client.time()
        return seconds * 1000 + micros // 1000

    job_id = jobs.enqueue(queue, NewJob(payload="{}", max_attempts=5)).id
    before_claim = server_ms()
    ran_from = time.monotonic()  # the run's start, on the (unshifted) monotonic clock
    claimed = jobs.claim(queue, "clock-worker", lease_ms=lease_ms, start_now=1).jobs[0]
    after_claim = server_ms()
    ran_us = int((time.monotonic() - ran_from) * 1e6)
    extended = jobs.extend(queue, job_id, claimed.token, lease_ms * 2, ran_us=ran_us)
    after_extend = server_ms()
    reaped = jobs.reap(queue).moved  # a client hours ahead must not expire a live lease
    retried = jobs.retry(
        queue, job_id, claimed.token, error='{"exception_class_path": "x", "traceback": ""}',
        summary="x", backoff_ms=lease_ms,
    )  # fmt: skip
    after_retry = server_ms()
    row = jobs.get(queue, job_id)
    return {
        "client_ms": int(time.time() * 1000),
        "before_claim": before_claim,
        "after_claim": after_claim,
        "claim_deadline": claimed.job.lease_deadline,
        "started_at_us": row.started_at,  # stamped by the extend: the run began at the claim
        "extended": extended,
        "after_extend": after_extend,
        "reaped": reaped,
        "retry_due": retried.due_ms,
        "after_retry": after_retry,
        "enqueued_at_us": row.enqueued_at,
    }
