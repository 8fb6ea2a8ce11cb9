"""Schedule fixtures: the engine on the suite's servers, and schedules to store."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.scheduler import Scheduler
from echomq_django.engine.schedules import Schedule

PAYLOAD = (
    '{"v":1,"task":"tests.django.tasks.add","args":[1,2],"kwargs":{},"backend":"default",'
    '"takes_context":false}'
)


def every(name: str = "beat", queue: str = "q", seconds: int = 1, **options: Any) -> Schedule:
    """A schedule firing tests.django.tasks.add every ``seconds``."""
    job = NewJob(payload=PAYLOAD, task="tests.django.tasks.add", priority=3, max_attempts=4)
    return Schedule(name=name, queue=queue, job=job, every_ms=seconds * 1000, **options)


def tick_of(job_id: str) -> int:
    """The tick a fired job is for: its UUIDv7 timestamp."""
    return uuid.UUID(job_id).int >> 80


def expected_id(queue: str, name: str, tick: int) -> str:
    """fire.lua's id, derived again here: the tick's ms, then bits of SHA-1(key, tick)."""
    h = hashlib.sha1(f"{QueueKeys.of(queue).base}schedule:{name}:{tick}".encode()).hexdigest()
    ms = f"{tick:012x}"
    variant = "89ab"[int(h[3], 16) % 4]
    return f"{ms[:8]}-{ms[8:]}-7{h[:3]}-{variant}{h[4:7]}-{h[7:19]}"


def whole_second(read_ms: Callable[[], int]) -> int:
    """The server's current whole second, read in its first half.

    A test that computes "the latest due tick" of a one-second schedule and then fires
    expects the fire to run in the same second: read at 990 ms, a fire a few ms later
    is in the next one (a later tick, a missed count one higher). Read early, what the
    test does next stays in that second unless the machine stalls half a second."""
    while True:
        now = read_ms()
        if now % 1000 < 500:
            return now // 1000 * 1000
        time.sleep((1000 - now % 1000) / 1000)


def backdate(client, queue: str, name: str, next_ms: int) -> None:
    """What a scheduler that stopped leaves behind: a next fire time in the past."""
    client.zadd(QueueKeys.of(queue).schedules, {name: next_ms})


@pytest.fixture
def jobs(connector) -> Jobs:
    return Jobs(connector)


@pytest.fixture
def scheduler(jobs) -> Scheduler:
    return Scheduler(jobs)
