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
def nap(seconds, started_file="", finished_file=""):
    """Touch ``started_file`` (if given), sleep, touch ``finished_file`` (if given), then
    say how long: for the shutdown tests."""
    if started_file:
        Path(started_file).touch()
    time.sleep(seconds)
    if finished_file:
        Path(finished_file).touch()
    return seconds


@task(queue_name="slow", takes_context=True)
def until_stopped(context, started_file):
    """Runs until its worker stops, which it reads from its context; then returns."""
    Path(started_file).touch()
    end = time.monotonic() + 30
    while time.monotonic() < end:
        if context.stop_requested:
            return "stopped early"
        time.sleep(0.02)
    return "never told"


@task(queue_name="slow")
def hold(started_dir, release_file):
    """Leave a file in ``started_dir`` and run until ``release_file`` exists (at most
    60 s): a slow job the test ends, for the per-queue share tests."""
    Path(started_dir, f"{time.monotonic_ns()}").touch()
    deadline = time.monotonic() + 60
    while not Path(release_file).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return "released"
