"""Huey no-op tasks on RedisHuey (blocking BRPOP consumer, results off)."""

import os
import time

from huey import RedisHuey

from bench.tasks import probe

huey = RedisHuey("bench", url=os.environ["BENCH_URL"], results=False)


@huey.task()
def noop():
    probe.done(time.time())


@huey.task()
def lat(ts_ms):
    probe.latency(ts_ms)
