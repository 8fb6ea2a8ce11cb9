"""Fixtures more than one folder uses (loaded by tests/conftest.py as a plugin).

echomq       the Django settings aimed at the test server (flushed), with the test TASKS
spawn        spawn("worker" | "reaper" | "runworker" | "runreaper", url, *args) -> procs.Proc,
             killed at teardown if still alive
valkey_url   the session Valkey, flushed: process tests run on one server kind to stay fast
valkey_jobs  the engine API on ``valkey_url``
enqueued_past_a_broken_receiver  the ids task_enqueued was sent for, to a receiver
             connected after one that raises

A folder's conftest.py may define a fixture of the same name for its own tests
(tests/cli and tests/outbox have their own ``echomq``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from echomq_django import conf
from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs
from tests.support import procs


@pytest.fixture
def echomq(settings: Any, url: str, redis_client: Any) -> Iterator[Any]:
    """The Django settings aimed at the test server (flushed), with the test TASKS."""
    from tests.django import settings as test_settings

    settings.ECHOMQ = {"URL": url}
    settings.TASKS = test_settings.TASKS
    conf.reset()
    yield redis_client
    conf.reset()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., procs.Proc]]:
    """spawn("worker" | "reaper", url, *args) -> procs.Proc, killed at teardown if alive."""
    started: list[procs.Proc] = []

    def start(kind: str, url: str, *args: str, **env: str) -> procs.Proc:
        proc = procs.start(kind, url, *args, log_dir=tmp_path, **env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


@pytest.fixture
def valkey_url(valkey_server: Any) -> str:
    """The session Valkey, flushed: process tests run on one server kind to stay fast."""
    valkey_server.command("FLUSHALL")
    return str(valkey_server.url)


@pytest.fixture
def valkey_jobs(valkey_url: str) -> Iterator[Jobs]:
    connector = Connector.from_url(valkey_url)
    yield Jobs(connector)
    connector.close()


@pytest.fixture
def enqueued_past_a_broken_receiver() -> Iterator[list[str]]:
    """A task_enqueued receiver that raises, then one that records the ids it is sent:
    a receiver's error must cost no job and no other receiver its signal."""
    from echomq_django.compat import task_enqueued

    seen: list[str] = []

    def broken(sender: Any, task_result: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    def record(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(task_result.id)

    task_enqueued.connect(broken)
    task_enqueued.connect(record)
    yield seen
    task_enqueued.disconnect(broken)
    task_enqueued.disconnect(record)
