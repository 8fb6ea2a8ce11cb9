"""Tasks the Django-layer tests enqueue (workers load them through TASK_MODULES)."""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import timedelta

from echomq_django import Retry
from echomq_django.compat import task


@task
def add(a, b):
    return a + b


@task
def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@task(priority=5, queue_name="emails", max_attempts=2)
def fail(message):
    raise ValueError(message)


@task(takes_context=True, max_attempts=3)
def flaky(context, succeed_on):
    """Fails until attempt ``succeed_on``; returns the attempt it succeeded on."""
    if context.attempt < succeed_on:
        raise RuntimeError(f"attempt {context.attempt} fails")
    return {"attempt": context.attempt, "id": context.task_result.id}


@task
async def async_add(a, b):
    await asyncio.sleep(0.01)
    return a + b


@task(max_attempts=1)
def exits():
    sys.exit(3)


@task(max_attempts=1)
def interrupted():
    raise KeyboardInterrupt


@task
def returns_a_set():
    return {1, 2}


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("this exception cannot say what it is")


@task
def raises_unprintable():
    raise Unprintable


@task(max_attempts=4, backoff=0.25, lease=0.7, result_ttl=60, timeout=timedelta(seconds=1.5))
def tuned(fails=False):
    if fails:
        raise ValueError("tuned fails")
    return "ok"


@task(enqueue_on_commit=False)
def urgent():
    """Sent at once even when the backend enqueues on commit."""


@task
def repeat(text, times):
    return text * times


class Unlucky(Exception):
    """A task's own exception class."""


@task(max_attempts=3, backoff=0, retry_on=(ConnectionError,), no_retry_on=ConnectionRefusedError)
def picky(kind):
    """Retried only on ConnectionError, and never on its subclass ConnectionRefusedError."""
    raise {"reset": ConnectionResetError, "refused": ConnectionRefusedError, "value": ValueError}[
        kind
    ](kind)


BACKOFF_CALLS: list[tuple] = []  # what stepped_backoff saw, for the tests (in-process workers)


def stepped_backoff(exception, task_result):
    """0.1 s after the first failure, 0.2 s after the second, then no more retries."""
    BACKOFF_CALLS.append(
        (type(exception).__name__, task_result.status, task_result.attempts,
         [e.exception_class_path for e in task_result.errors])
    )  # fmt: skip
    if task_result.attempts >= 3:
        return None
    return timedelta(milliseconds=100 * task_result.attempts)


@task(max_attempts=5, backoff=stepped_backoff)
def backs_off():
    raise Unlucky("still down")


@task(takes_context=True, max_attempts=3)
def asks_to_retry(context, until, delay):
    """Asks for a retry (after ``delay`` seconds) until attempt ``until``."""
    if context.attempt < until:
        raise Retry(delay=delay, reason=f"not ready at attempt {context.attempt}")
    return context.attempt


@task
def long_traceback(depth):
    """Fails ``depth`` frames deep: a traceback of thousands of lines."""
    if depth:
        return long_traceback.call(depth - 1)
    raise Unlucky("at the bottom")


@task(max_attempts=2, backoff=60)
def patient():
    """Fails; retried a minute later."""
    raise Unlucky("try again in a minute")


@task
def nap(seconds):
    time.sleep(seconds)
    return seconds


def nested(depth, inner=1):
    """``inner`` in ``depth`` lists."""
    for _ in range(depth):
        inner = [inner]
    return inner


@task(max_attempts=3)
def returns_badly(kind):
    """Returns a value that storage would not give back as it is (never retried)."""
    if kind == "deep":
        return nested(101)
    return {1: "a", "1": "b"}  # keys that JSON makes the same
