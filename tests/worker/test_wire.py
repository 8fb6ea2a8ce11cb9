"""The worker's wire: calls sent now, their replies read later; what a lost connection,
a server that forgot its scripts, and an executor busy in a long job do to it."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from echomq_django.engine import script
from echomq_django.engine.connector import Connector
from echomq_django.engine.errors import ServerUnavailable
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.outage import Outage
from echomq_django.engine.reaper import Reaper
from echomq_django.engine.script import Call
from echomq_django.engine.worker import Success, Worker
from echomq_django.engine.worker.wire import Wire
from tests.support.proxy import Fault, FaultProxy
from tests.support.running import RunningWorker
from tests.support.waiting import wait_until


def _stats_call() -> Call:
    stats = script.load("stats")
    return Call(stats, stats.keys_for(QueueKeys.of("q")), [])


def test_replies_are_read_later_in_the_order_sent(valkey_jobs):
    wire = Wire(valkey_jobs.connector, Outage(logging.getLogger("test")))
    answers: list[tuple[int, list[Any]]] = []
    for n in range(3):
        wire.send([_stats_call(), _stats_call()], lambda replies, n=n: answers.append((n, replies)))
    assert wire.waiting_since and answers == []  # nothing read yet: the sender went on
    wire.pump(wait=True)
    wire.pump(wait=True)
    wait_until(lambda: (wire.pump(), len(answers) == 3)[1])
    assert [n for n, _ in answers] == [0, 1, 2]
    assert all(
        len(replies) == 2 and not isinstance(replies[0], Exception) for _, replies in answers
    )
    assert not wire.waiting_since
    wire.close()


def test_a_lost_connection_answers_every_waiting_batch_and_backs_off(valkey_server):
    with FaultProxy(valkey_server.host, valkey_server.port) as proxy:
        connector = Connector.from_url(proxy.url, socket_timeout=2)
        connector.load(script.load("stats"))
        wire = Wire(connector, Outage(logging.getLogger("test")))
        answers: list[list[Any]] = []
        stalled = proxy.arm(Fault.STALL)
        wire.send([_stats_call()], answers.append)
        wire.send([_stats_call(), _stats_call()], answers.append)
        wire.pump(wait=True)  # the stalled request is never answered: the read times out
        wait_until(stalled.is_set)
        assert [len(a) for a in answers] == [1, 2]
        assert all(isinstance(r, ServerUnavailable) for a in answers for r in a)
        assert wire.down_until > time.monotonic()
        sent_before = proxy.connections
        wire.send([_stats_call()], answers.append)  # refused at once, while backing off
        assert isinstance(answers[-1][0], ServerUnavailable) and proxy.connections == sent_before
        wait_until(lambda: time.monotonic() >= wire.down_until)
        wire.send([_stats_call()], answers.append)  # a new connection
        wire.pump(wait=True)
        assert not isinstance(answers[-1][0], Exception)
        wire.close()
        connector.close()


def test_a_worker_goes_on_when_the_server_forgets_its_scripts(valkey_jobs):
    """SCRIPT FLUSH (a restart without the script cache) between the claims and the
    completions on the wire: a NOSCRIPT reply is run again through the connector."""
    jobs = valkey_jobs
    jobs.enqueue_many("q", [NewJob(payload="{}") for _ in range(3000)])
    for name in ("claim", "complete", "events"):  # loaded before: the flushes must hit them
        jobs.connector.load(script.load(name))
    client = jobs.connector.client
    flushing = threading.Event()

    def handler(claimed):
        flushing.set()
        time.sleep(0.0002)  # 3,000 jobs outlast the flushes
        return Success()

    worker = Worker(jobs, ["q"], handler, burst=True)
    running = RunningWorker(worker)
    flushing.wait(10)
    for _ in range(5):  # a few restarts' worth, each met by the calls then in flight
        client.script_flush()
        time.sleep(0.1)
    stats = running.stats(timeout=60)
    assert stats.completed == 3000 and jobs.stats("q").counts["completed"] == 3000
    assert jobs.connector.script_loads > 3


def test_claims_answered_while_the_only_executor_runs_a_long_job_are_held_and_renewed(
    valkey_jobs,
):
    """Short jobs run first (read-ahead grows, a claim goes out), then a long one holds the
    only executor: the heartbeat reads that claim's reply and keeps those leases, so the
    reaper never returns them (they are given back, free, as read-ahead stuck behind a slow
    job)."""
    jobs = valkey_jobs
    jobs.enqueue_many("q", [NewJob(payload="short") for _ in range(300)])
    jobs.enqueue("q", NewJob(payload="long"))
    jobs.enqueue_many("q", [NewJob(payload="short") for _ in range(300)])

    def handler(claimed):
        if claimed.job.payload == "long":
            time.sleep(2.0)  # four leases long
        return Success()

    reaper = Reaper(jobs, ["q"], discover=False, interval_s=0.05)
    reaping = threading.Thread(target=reaper.run, daemon=True)
    reaping.start()
    worker = Worker(jobs, ["q"], handler, lease_ms=500, burst=True)
    stats = RunningWorker(worker).stats(timeout=60)
    reaper.stop()
    reaping.join(5)
    counts = jobs.stats("q")
    assert counts.counts["completed"] == 601 and stats.completed == 601
    assert counts.metrics.get("reaped", 0) == 0, counts.metrics
