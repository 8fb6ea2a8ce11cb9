"""CLI-and-operations fixtures: the app aimed at a real server, and servers configured
the ways ``check --deploy`` must notice (AOF on, RDB only, an evicting memory policy).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from echomq_django import conf
from echomq_django.devserver import EmbeddedServer, ServerBinaryNotFound
from echomq_django.engine.jobs import Claimed, Jobs, NewJob
from tests import servers

ROOT = Path(__file__).resolve().parents[2]
QUEUES = ["default", "emails"]
DEAD_ERROR = '{"exception_class_path": "builtins.ValueError", "traceback": "ValueError: boom"}'


@pytest.fixture
def echomq(settings, url, redis_client) -> Iterator[str]:
    """settings.ECHOMQ aimed at the suite's (flushed) server; yields its URL."""
    settings.ECHOMQ = {"URL": url, "QUEUES": QUEUES}
    conf.reset()
    yield url
    conf.reset()


@pytest.fixture
def jobs(echomq) -> Jobs:
    return conf.get_jobs()


def enqueue(jobs: Jobs, queue: str = "default", n: int = 1, **fields: Any) -> list[str]:
    new = [NewJob(payload=json.dumps({"n": i}), task="tests.task", **fields) for i in range(n)]
    return [e.id for e in jobs.enqueue_many(queue, new)]


def make_dead(jobs: Jobs, queue: str = "default", n: int = 1) -> list[str]:
    """Enqueue ``n`` jobs and fail each for good: they end in dead with one error.

    Call it while ``queue`` has nothing pending: it claims the next ``n`` jobs.
    """
    ids = enqueue(jobs, queue, n, max_attempts=1)
    for c in _claim_exactly(jobs, queue, ids):
        jobs.retry(queue, c.id, c.token, error=DEAD_ERROR, summary="ValueError: boom")
    return ids


def make_completed(jobs: Jobs, queue: str = "default", n: int = 1) -> list[str]:
    """Enqueue ``n`` jobs and complete them (same rule as ``make_dead``)."""
    ids = enqueue(jobs, queue, n)
    for c in _claim_exactly(jobs, queue, ids):
        jobs.complete(queue, c.id, c.token, '"ok"')
    return ids


def _claim_exactly(jobs: Jobs, queue: str, ids: list[str]) -> list[Claimed]:
    claimed = jobs.claim(queue, "w1", count=len(ids), lease_ms=1000).jobs
    assert sorted(c.id for c in claimed) == sorted(ids), "the queue had other jobs pending"
    return claimed


@dataclass
class Output:
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def echomq_cmd(*args: str) -> Output:
    """``manage.py echomq ARGS`` in this process (bad arguments raise CommandError)."""
    out, err = io.StringIO(), io.StringIO()
    call_command("echomq", *args, stdout=out, stderr=err)
    return Output(out.getvalue(), err.getvalue())


def manage_py(
    *args: str, url: str, wait: bool = True, settings: str = "tests.settings", **kwargs: Any
) -> subprocess.CompletedProcess | subprocess.Popen:
    """``python -m django ARGS`` in a child process with the test settings aimed at ``url``."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings,
        "ECHOMQ_TEST_URL": url,
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "120",
    }
    argv = [sys.executable, "-m", "django", *args]
    if not wait:
        return subprocess.Popen(argv, cwd=ROOT, env=env, text=True, **kwargs)
    return subprocess.run(argv, cwd=ROOT, env=env, text=True, capture_output=True, timeout=60)


# ---------------------------------------------------------------------------------------
# Servers configured for the deploy checks (module scope: started once per test module)
# ---------------------------------------------------------------------------------------


def _start(**kwargs: Any) -> EmbeddedServer:
    try:
        binary = servers.valkey_binary()
    except ServerBinaryNotFound as exc:
        pytest.skip(str(exc))
    return EmbeddedServer(binary=binary, **kwargs).start()


@pytest.fixture(scope="module")
def aof_server() -> Iterator[EmbeddedServer]:
    server = _start(appendonly=True)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rdb_server() -> Iterator[EmbeddedServer]:
    server = _start(extra_args=["--save", "3600 1"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def lru_server() -> Iterator[EmbeddedServer]:
    server = _start(appendonly=True, extra_args=["--maxmemory-policy", "allkeys-lru"])
    yield server
    server.stop()
