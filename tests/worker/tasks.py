"""Django tasks run by the ``runworker`` subprocess tests (loaded through TASK_MODULES)."""

from __future__ import annotations

import time
from pathlib import Path

from echomq_django.compat import task


@task
def add(a, b):
    return a + b


@task(max_attempts=2)
def boom(message):
    raise ValueError(message)


@task(queue_name="slow")
def nap(seconds, started_file=""):
    """Touch ``started_file`` (if given), sleep, then say how long: for the shutdown tests."""
    if started_file:
        Path(started_file).touch()
    time.sleep(seconds)
    return seconds
