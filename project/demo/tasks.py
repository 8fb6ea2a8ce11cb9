"""Demo tasks: one of each kind, to watch them move through the queues in the admin.

The worker finds them because this is an installed app's ``tasks`` module.
"""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, datetime

from echomq_django.compat import task


@task
def add(a: int, b: int) -> int:
    """A fast task."""
    return a + b


@task(queue_name="slow", lease=10)
def slow(seconds: float) -> str:
    """A slow task on its own queue; the worker's heartbeat keeps its short lease alive."""
    time.sleep(seconds)
    return f"slept {seconds} s"


@task(max_attempts=3, backoff=2)
def always_fails(message: str) -> None:
    """Fails on every attempt: retried twice (2 s apart), then dead with three errors."""
    raise RuntimeError(message)


@task(takes_context=True, max_attempts=3, backoff=1)
def unreliable(context, chance: float) -> dict:
    """Fails at random; the context says which attempt this is."""
    if random.random() > chance:
        raise ConnectionError(f"attempt {context.attempt}: the remote service did not answer")
    return {"attempt": context.attempt, "result_id": context.task_result.id}


@task
async def fetch(delay: float) -> str:
    """A coroutine task: the worker runs it in an event loop."""
    await asyncio.sleep(delay)
    return f"fetched after {delay} s"


@task(queue_name="emails", priority=10)
def send_welcome(email: str) -> str:
    """What a view enqueues after a sign-up (a real one would send mail)."""
    return f"welcome mail queued for {email}"


@task
def heartbeat() -> str:
    """Fired every minute by the demo's schedule (ECHOMQ["SCHEDULES"] in settings.py)."""
    return f"alive at {datetime.now(UTC):%H:%M:%S} UTC"
