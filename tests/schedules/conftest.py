"""Schedule fixtures: the engine on the suite's servers, and schedules to store."""

from __future__ import annotations

import hashlib
import uuid
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


def backdate(client, queue: str, name: str, next_ms: int) -> None:
    """What a scheduler that stopped leaves behind: a next fire time in the past."""
    client.zadd(QueueKeys.of(queue).schedules, {name: next_ms})


@pytest.fixture
def jobs(connector) -> Jobs:
    return Jobs(connector)


@pytest.fixture
def scheduler(jobs) -> Scheduler:
    return Scheduler(jobs)
