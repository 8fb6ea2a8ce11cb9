"""A renewal the server refuses is tried again at the lease's own pace, never in a loop.

An operator cancels a running job: its next renewal is refused (CancelRequested) and
the worker stops the run. A run that does not stop at once (a long C call, a task
that catches the soft stop) kept its lease due for renewal: the heartbeat sent an
extend every few milliseconds, about 60 a second, for as long as the run went on.
"""

from __future__ import annotations

import contextlib
import threading
import time

from echomq_django.engine.jobs import NewJob
from echomq_django.engine.worker import Success
from tests.support.waiting import wait_until

WATCH_S = 1.5


def test_a_cancelled_run_that_goes_on_is_not_renewed_in_a_loop(jobs, start_worker, monkeypatch):
    extends: list[float] = []
    extend_many = jobs.extend_many

    def counted(items, **options):
        extends.append(time.monotonic())
        return extend_many(items, **options)

    monkeypatch.setattr(jobs, "extend_many", counted)
    job_id = jobs.enqueue("q", NewJob(payload="1")).id
    done = threading.Event()

    def handler(claimed):
        while not done.is_set():  # deaf to the soft stop until the test is over
            with contextlib.suppress(BaseException):  # the Cancelled raised into it
                done.wait(0.01)
        return Success('"ok"')

    rw = start_worker(handler, lease_ms=30_000)
    wait_until(lambda: jobs.stats("q").counts["active"] == 1)
    asked = len(extends)
    jobs.cancel("q", job_id)
    wait_until(lambda: len(extends) > asked)  # the renewal that hears of the cancel
    before = len(extends)
    time.sleep(WATCH_S)
    refused = len(extends) - before
    done.set()
    assert refused <= 2 * WATCH_S + 1, f"{refused} extends in {WATCH_S:g} s"
    # Its run finished the work after all: kept (executor.py), not thrown away.
    wait_until(lambda: jobs.get("q", job_id).state == "completed")
    rw.stop()
