"""Tasks the Django-layer tests enqueue (workers load them through TASK_MODULES)."""

from __future__ import annotations

import asyncio
import sys

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


@task(max_attempts=4, retry_backoff=0.25, lease=0.7, result_ttl=60)
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
