"""No-op Django Tasks for the vtasks backend (alias ``vtasks``, see bench/djsettings/)."""

import time

from django.tasks import task

from bench.tasks import probe


@task(backend="vtasks", queue_name="bench")
def noop():
    probe.done(time.time())


@task(backend="vtasks", queue_name="bench")
def lat(ts_ms):
    probe.latency(ts_ms)
