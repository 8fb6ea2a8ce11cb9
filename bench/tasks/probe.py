"""The bookkeeping every Python peer's no-op task does: a few bytes into a pipe.

``done(t_start)`` writes ``d`` to the harness's FIFO (env BENCH_TALLY, see
``bench.common.Tally``); the first task of each worker process writes
``s<t_start>\\n`` before it. No server round trip: the rate measured is the
queue's. ``latency(ts_ms)`` RPUSHes to bench:lat the milliseconds since the
enqueue call began (after the measured moment, so its round trip is not
counted). The FIFO and the redis-py client are opened per process on first use
(after any fork).
"""

import os
import threading
import time

import redis

from bench.common import LAT_KEY, TALLY_ENV

_lock = threading.Lock()  # dramatiq runs tasks on several threads
_client = None
_client_pid = None
_tally_fd = None
_tally_pid = None


def done(t_start):
    global _tally_fd, _tally_pid
    if _tally_pid != os.getpid():
        with _lock:
            if _tally_pid != os.getpid():  # the first task of this process
                _tally_fd = os.open(os.environ[TALLY_ENV], os.O_WRONLY)
                os.write(_tally_fd, b"s%r\nd" % t_start)
                _tally_pid = os.getpid()
                return
    os.write(_tally_fd, b"d")


def latency(ts_ms):
    global _client, _client_pid
    t = time.time() * 1000.0
    if _client_pid != os.getpid():
        _client = redis.Redis.from_url(os.environ["BENCH_URL"])
        _client_pid = os.getpid()
    _client.rpush(LAT_KEY, repr(t - float(ts_ms)))
