"""The bookkeeping every Python peer's no-op task does (one INCR per job).

``done(t_start)``: INCR bench:done. The first task of each worker process
also INCRs bench:started; the one that makes it reach BENCH_PROCS (all worker
processes are running) SETs bench:t0 to "<its start time> <done count before
it>"; the very first task SETs bench:first to its start time (the fallback
clock when a process never gets a job). The task that makes bench:done reach N (env BENCH_N) RPUSHes its end
time to bench:fin, which the harness waits for. ``latency(ts_ms)``: RPUSH bench:lat with
the milliseconds since the enqueue call began. One redis-py client per
worker process, made on first use (after any fork).
"""

import os
import threading
import time

import redis

from bench.common import DONE_KEY, FIN_KEY, FIRST_KEY, LAT_KEY, STARTED_KEY, T0_KEY

_lock = threading.Lock()  # dramatiq runs tasks on several threads
_client = None
_pid = None
_started_pid = None
_n = int(os.environ.get("BENCH_N", "0") or 0)
_procs = int(os.environ.get("BENCH_PROCS", "1") or 1)


def _r():
    global _client, _pid
    if _client is None or _pid != os.getpid():
        with _lock:
            if _client is None or _pid != os.getpid():
                _client = redis.Redis.from_url(os.environ["BENCH_URL"])
                _pid = os.getpid()
    return _client


def done(t_start):
    global _started_pid
    r = _r()
    n = r.incr(DONE_KEY)
    if n == 1:
        r.set(FIRST_KEY, repr(t_start))
    with _lock:
        first = _started_pid != os.getpid()  # first task of this process
        _started_pid = os.getpid()
    if first and r.incr(STARTED_KEY) == _procs:
        r.set(T0_KEY, f"{t_start!r} {n - 1}")
    if n == _n:
        r.rpush(FIN_KEY, repr(time.time()))


def latency(ts_ms):
    t = time.time() * 1000.0
    _r().rpush(LAT_KEY, repr(t - float(ts_ms)))
