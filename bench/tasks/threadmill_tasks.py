"""No-op Django Tasks for the threadmill backend (alias ``threadmill``, see bench/djsettings/)."""

import time

from django.tasks import task

from bench.tasks import probe


@task(backend="threadmill", queue_name="bench")
def noop():
    probe.done(time.time())


@task(backend="threadmill", queue_name="bench")
def lat(ts_ms):
    probe.latency(ts_ms)
