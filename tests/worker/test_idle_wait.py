"""The idle wait against cuts from other threads, on real servers.

A cut (a share of the slots got room), a stop or the watchdog closes the blocking
connection from another thread while an executor may be inside redis-py's call on it.
redis-py does not expect that: as well as a ConnectionError it can fail with whatever it
met half-closed. Seen in CI: a TypeError from its poll of a socket gone None, which
ended the executor thread and left its slot empty.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from redis._parsers import hiredis

from echomq_django.engine.jobs import NewJob
from echomq_django.engine.worker import Success, Worker
from echomq_django.engine.worker.waiting import IdleWait


@pytest.fixture
def standalone_jobs(jobs):
    if jobs.connector.is_cluster:
        pytest.skip("needs a standalone server (a cluster waits with a thread per queue)")
    return jobs


def test_a_cut_inside_the_blocking_call_ends_the_wait_and_the_next_wait_works(
    standalone_jobs, monkeypatch
):
    jobs = standalone_jobs
    idle = IdleWait(jobs, ["q"], block_s=5.0, stopping=threading.Event())
    socket_can_read = hiredis._socket_can_read
    cuts = []

    def cut_under_the_call(sock, timeout):
        """The blocking call checks its connection: another thread's cut lands now."""
        if not cuts:
            cuts.append(time.monotonic())
            idle.cut()  # the pool disconnects the connection in use
            return True  # a socket shut down under it reads as ready (EOF)
        return socket_can_read(sock, timeout)

    monkeypatch.setattr(hiredis, "_socket_can_read", cut_under_the_call)
    started = time.monotonic()
    idle.block(None)  # raised TypeError out of redis-py
    assert cuts, "redis-py no longer checks the connection there: move the cut"
    assert time.monotonic() - started < 2.0  # ended by the cut, not by its 5 s timeout

    waiter = threading.Thread(target=idle.block, args=(None,))
    started = time.monotonic()
    waiter.start()
    jobs.enqueue("q", NewJob(payload=json.dumps(1), task="t"))  # its wake-up ends the wait
    waiter.join(4.0)
    assert not waiter.is_alive() and time.monotonic() - started < 4.0
    idle.close()


def test_a_bug_in_the_idle_wait_stops_the_worker_with_its_reason(jobs, monkeypatch):
    """Not a silently dead executor thread, and a worker that no longer runs jobs."""

    def broken(*args, **kwargs):
        raise TypeError("a bug in the wait")

    monkeypatch.setattr(IdleWait, "block", broken)
    worker = Worker(jobs, ["q"], lambda c: Success("1"), idle_block_s=0.2)
    running = threading.Thread(target=worker.run, daemon=True)
    running.start()
    running.join(10.0)
    if running.is_alive():
        worker.stop()
    assert not running.is_alive(), "the worker kept going without its executor"
    assert worker.fatal and "TypeError: a bug in the wait" in worker.fatal
