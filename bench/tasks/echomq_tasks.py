"""EchoMQ no-op tasks: Django Tasks framework tasks, run by ``manage.py runworker``."""

import time

from bench.tasks import probe
from echomq_django.compat import task


@task(queue_name="bench")
def noop():
    probe.done(time.time())


@task(queue_name="bench")
def lat(ts_ms):
    probe.latency(ts_ms)
