"""Django tasks run by the ``runworker`` subprocess tests (loaded through TASK_MODULES)."""

from __future__ import annotations

import time

from echomq_django.compat import task


@task
def add(a, b):
    return a + b


@task(max_attempts=2)
def boom(message):
    raise ValueError(message)


@task(queue_name="slow")
def nap(seconds):
    """Sleep, then say how long: a long job for the lease and shutdown tests."""
    time.sleep(seconds)
    return seconds
