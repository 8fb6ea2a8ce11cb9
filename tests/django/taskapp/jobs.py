"""Tasks in an app module that is not ``tasks.py``."""

from __future__ import annotations

import contextlib
import os
import time

from echomq_django.compat import task


class Unlucky(Exception):
    pass


@task
def add(a, b):
    return a + b


@task
def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@task
def fails(message):
    raise ValueError(message)


@task
def unlucky(message):
    raise Unlucky(message)


@task
def exits(code):
    raise SystemExit(code)


@task(takes_context=True)
def with_context(context, value):
    return {"attempt": context.attempt, "id": context.task_result.id, "value": value}


@task(max_attempts=3, backoff=0, timeout=30, lease=10)
def tuned(x):
    """EchoMQ options: on Django's own backends they are ignored (with a warning)."""
    return x * 2


@task
def deep(depth):
    """Fails ``depth`` frames down: a traceback of thousands of lines."""
    if depth:
        return deep.call(depth - 1)
    raise Unlucky("at the bottom")


@task(timeout=1)
def stuck(seconds):
    """Past its limit in one C call: only killing its process stops it."""
    time.sleep(seconds)


@task(timeout=1)
def swallows(seconds):
    """Catches its soft stop and goes on, then returns as if it had succeeded."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with contextlib.suppress(BaseException):  # the point: a task that will not stop
            time.sleep(0.05)
    return "done"


@task(enqueue_on_commit="outbox")
def parcel(n):
    """Through the outbox, from a module no discovery loads (not tasks.py, no TASK_MODULES)."""
    return n


@task
def dies(code):
    """Takes its process down with it (an OOM kill, a segfault)."""
    os._exit(code)
