"""Dramatiq no-op actors on the Redis broker (``dramatiq bench.tasks.dramatiq_tasks``)."""

import os
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench.tasks import probe

broker = RedisBroker(url=os.environ["BENCH_URL"])
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name="bench", max_retries=0)
def noop():
    probe.done(time.time())


@dramatiq.actor(queue_name="bench", max_retries=0)
def lat(ts_ms):
    probe.latency(ts_ms)
