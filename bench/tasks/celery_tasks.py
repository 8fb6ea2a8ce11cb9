"""Celery no-op tasks: Redis broker, no result backend (``celery -A bench.tasks.celery_tasks``)."""

import os
import time

from celery import Celery

from bench.tasks import probe

app = Celery("bench", broker=os.environ["BENCH_URL"])
app.conf.update(
    task_ignore_result=True,
    result_backend=None,
    task_default_queue="bench",
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)


@app.task(name="bench.noop")
def noop():
    probe.done(time.time())


@app.task(name="bench.lat")
def lat(ts_ms):
    probe.latency(ts_ms)
