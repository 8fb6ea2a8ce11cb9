"""No-op Django Tasks for the djhuey backend (alias ``djhuey``, see bench/djsettings/)."""

import time

from bench.tasks import probe
from echomq_django.compat import task  # django.tasks, or the backport on Django 5.2


@task(backend="djhuey", queue_name="bench")
def noop():
    probe.done(time.time())


@task(backend="djhuey", queue_name="bench")
def lat(ts_ms):
    probe.latency(ts_ms)
