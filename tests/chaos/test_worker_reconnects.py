"""The real worker and reaper behind the fault proxy: connections cut and replies lost, work goes on.

The worker's every connection (scripts and its blocking BZPOPMIN) crosses the
proxy; the proxy keeps cutting all of them and fires one-shot faults on the
scripts (lost replies, stalls, half requests), so claims, completes and
extends all fail mid-flight at some point. The worker must reconnect each time
and finish every job; nothing may be lost or end in two places. A claim whose
reply was lost leaves jobs leased to nobody: the reaper (same proxy) returns
them when their lease runs out, free (no attempt spent), unless the worker's
replay of the claim got them back first.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter

import redis

from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.reaper import Reaper
from echomq_django.engine.worker import Success, Worker
from tests.chaos import snapshot
from tests.support.proxy import Fault, FaultProxy

Q = "netwk"
N = 600
FAULT_EVERY = 4  # at most one script in this many meets a fault


def _chaos(proxy: FaultProxy, stop: threading.Event) -> Counter[str]:
    """Until ``stop``: every 100 ms cut every connection or arm the next fault, in turn.

    A fault is armed only once the one before it fired, and fires on the fourth script
    after its arming: faults strike scripts (at most one in four), not time. Armed by
    time alone, a fault would wait for the next script whenever it came, so a worker
    and reaper backing off through an outage would meet one on each try and the
    outage would never end: a flaw of the test, not of the worker (a lossy network
    does not save its losses for the next packet).

    Returns what happened: connections cut, and each fault that fired.
    """
    faults = itertools.cycle([Fault.DROP_REPLY, Fault.STALL, Fault.HALF_REQUEST])
    happened: Counter[str] = Counter()
    armed: list[tuple[Fault, threading.Event]] = []
    for beat in itertools.count():
        if stop.wait(0.1):
            break
        if beat % 5 in (0, 3):
            happened["connections cut"] += proxy.cut_all()
        elif not armed or armed[-1][1].is_set():
            fault = next(faults)
            armed.append((fault, proxy.arm(fault, after=FAULT_EVERY - 1)))
    proxy.disarm()
    happened.update(fault.value for fault, fired in armed if fired.is_set())
    return happened


def _through(proxy: FaultProxy) -> str:
    """Whether the proxy still carries a fresh connection's call (for a failure's message)."""
    client = redis.Redis.from_url(proxy.url, socket_timeout=2)
    try:
        return f"{proxy.connections} connections so far; a fresh PING: {client.ping()}"
    except redis.RedisError as exc:
        return f"{proxy.connections} connections so far; a fresh PING: {exc!r}"
    finally:
        client.close()


def test_worker_rides_out_cut_connections_and_lost_replies(
    direct: Jobs, proxy: FaultProxy, redis_client
):
    direct.enqueue_many(Q, [NewJob(payload=str(i)) for i in range(N)])  # default attempts
    seen: list[str] = []

    def handler(claimed):
        time.sleep(0.01)
        seen.append(claimed.id)
        return Success('"ok"')

    connector = Connector.from_url(proxy.url, socket_timeout=0.5)
    worker = Worker(Jobs(connector), [Q], handler, concurrency=4, lease_ms=800, idle_block_s=0.5)
    reaper = Reaper(Jobs(Connector.from_url(proxy.url, socket_timeout=0.5)), [Q], interval_s=0.2)
    stop = threading.Event()
    threads = [threading.Thread(target=t, daemon=True) for t in (worker.run, reaper.run)]
    for thread in threads:
        thread.start()
    faults: Counter[str] = Counter()
    chaos = threading.Thread(target=lambda: faults.update(_chaos(proxy, stop)), daemon=True)
    chaos.start()
    deadline = time.monotonic() + 30  # every job is processed under fire
    while direct.stats(Q).counts["completed"] < N and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    chaos.join()
    worker.stop()
    reaper.stop()
    for thread in threads:
        thread.join(10)

    counts = direct.stats(Q).counts
    assert counts == {"pending": 0, "scheduled": 0, "active": 0, "completed": N, "dead": 0}, (
        faults,
        _through(proxy),
        f"worker and reaper alive: {[t.is_alive() for t in threads]}",
        f"threads here: {threading.active_count()}",
        f"server clients: {redis_client.info('clients')['connected_clients']}",
    )
    spent = [
        int(e.fields["attempts"]) - int(e.fields["refunds"] or 0)
        for offset in range(0, N, 500)
        for e in direct.page(Q, "completed", offset=offset, count=500,
                             fields=("attempts", "refunds")).entries
    ]  # fmt: skip
    assert (len(spent), set(spent)) == (N, {1}), "a fault cost a job an attempt"
    assert not snapshot.places(redis_client, Q)
    assert set(seen) == {j.decode() for j in redis_client.zrange(f"emq:{{{Q}}}:completed", 0, -1)}
    assert faults["connections cut"] >= 5 and faults["drop_reply"] >= 1, faults
    assert proxy.connections > faults["connections cut"], "the worker reconnected after each cut"
