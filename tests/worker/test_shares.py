"""Per-queue shares of a worker's slots, in-process on a real server: a sized queue
never runs more jobs at once than its size, even under a burst, and never waits for
another queue's slots."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from echomq_django.engine.worker import Success, Worker
from echomq_django.engine.worker.shares import plan
from tests.support.waiting import wait_until
from tests.worker.test_worker import enqueue


def test_shares_never_run_more_than_their_size_under_a_burst(jobs, start_worker):
    sizes = {"a": 2, "b": 1}  # "c" is unsized: it shares the 2 slots left
    for queue in ("a", "b", "c"):
        enqueue(jobs, queue, n=25)
    lock = threading.Lock()
    now, most = Counter(), Counter()

    def handler(claimed):
        with lock:
            now[claimed.queue] += 1
            most[claimed.queue] = max(most[claimed.queue], now[claimed.queue])
        time.sleep(0.02)  # the job's work: long enough for the others to pile up
        with lock:
            now[claimed.queue] -= 1
        return Success("ok")

    stats = start_worker(
        handler, queues=("a", "b", "c"), sizes=sizes, concurrency=5, burst=True
    ).stats(60)
    assert stats.completed == 75
    assert most["a"] <= 2 and most["b"] <= 1 and most["c"] <= 2, most
    assert most["a"] == 2 and most["c"] >= 1  # the shares were used, not only respected


def test_a_full_share_that_frees_a_slot_cuts_the_idle_wait(jobs, start_worker):
    """The fetcher waits on the server only for "a" (its share has room, no work) while
    "b" is full; when "b" frees its slot, its next job starts without waiting for the
    wait's timeout (30 s here)."""
    release, started = threading.Event(), []

    def handler(claimed):
        started.append(claimed.id)
        if len(started) == 1:
            release.wait(30)
        return Success("ok")

    first, second = enqueue(jobs, "b", n=2)
    start_worker(handler, queues=("a", "b"), sizes={"a": 1, "b": 1}, concurrency=2, idle_block_s=30)
    wait_until(lambda: started == [first], timeout=15)
    wait_until(lambda: jobs.get("b", second).state == "pending")
    # The 2nd job's read-ahead was given back; now the fetcher waits for "a" alone.
    released = time.monotonic()
    release.set()
    wait_until(lambda: started == [first, second], timeout=10)
    assert time.monotonic() - released < 10


@pytest.mark.parametrize(
    ("sizes", "slots", "message"),
    [
        ({"x": 1}, 2, "not among the worker's queues"),
        ({"a": 0}, 2, "positive integer"),
        ({"a": True}, 2, "positive integer"),
        ({"a": 2}, 2, "leaving none for b"),
        ({"a": 1, "b": 2}, 4, "add up to 3"),
    ],
)
def test_sizes_that_do_not_fit_the_slots_are_refused(jobs, sizes, slots, message):
    with pytest.raises(ValueError, match=message):
        plan(["a", "b"], sizes, slots)
    with pytest.raises(ValueError, match=message):
        Worker(jobs, ["a", "b"], lambda c: Success("ok"), sizes=sizes, concurrency=slots)


def test_without_sizes_all_queues_share_every_slot():
    (share,) = plan(["a", "b"], {}, 3)
    assert (share.size, share.queues) == (3, ("a", "b"))
    shares = plan(["a", "b", "c"], {"b": 2}, 5)
    assert [(s.size, s.queues) for s in shares] == [(3, ("a", "c")), (2, ("b",))]
