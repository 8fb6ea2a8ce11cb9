"""RQ no-op tasks (the worker imports them by dotted path)."""

import time

from bench.tasks import probe


def noop():
    probe.done(time.time())


def lat(ts_ms):
    probe.latency(ts_ms)
