"""Engine fixtures and helpers: the engine API on the suite's real servers.

``jobs`` is ``Jobs(connector)`` on the top-level ``connector`` fixture, so adding a
cluster parameter there runs this whole folder on a real Valkey Cluster. Helpers
read the keyspace only through commands a cluster client also routes (SCAN over
all nodes, single-key reads); the few tests that need one standalone server say
so with the ``standalone`` fixture.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import STATES, QueueKeys

QUEUE = "q"
WORKER = "w1"


@pytest.fixture
def jobs(connector) -> Iterator[Jobs]:
    yield Jobs(connector)


@pytest.fixture
def standalone(connector):
    """The connector, for tests that need one standalone server (INFO, CONFIG, SCRIPT FLUSH)."""
    if connector.is_cluster:
        pytest.skip("needs a standalone server")
    return connector


def new(payload: str = '{"n": 0}', **fields: Any) -> NewJob:
    return NewJob(payload=payload, task="tests.task", **fields)


def error_json(summary: str = "ValueError: boom") -> str:
    """One failure as the worker records it: a JSON object."""
    return json.dumps({"exception_class_path": "builtins.ValueError", "traceback": summary})


def enqueue_n(jobs: Jobs, n: int, queue: str = QUEUE, **fields: Any) -> list[str]:
    return [
        e.id for e in jobs.enqueue_many(queue, [new(f'{{"n": {i}}}', **fields) for i in range(n)])
    ]


def members(jobs: Jobs, queue: str = QUEUE) -> dict[str, list[str]]:
    """Each place's members, in score order."""
    keys = QueueKeys.of(queue)
    client = jobs.connector.client
    return {state: list(client.zrange(keys.state_set(state), 0, -1)) for state in STATES}


def row(jobs: Jobs, job_id: str, queue: str = QUEUE) -> dict[str, str]:
    return jobs.connector.client.hgetall(QueueKeys.of(queue).job(job_id))


def rows(jobs: Jobs, queue: str = QUEUE) -> dict[str, dict[str, str]]:
    """Every row of the queue, by id."""
    keys = QueueKeys.of(queue)
    client = jobs.connector.client
    found = {}
    for key in client.scan_iter(
        match=keys.job_prefix.replace("{", "\\{").replace("}", "\\}") + "*"
    ):
        found[key.removeprefix(keys.job_prefix)] = client.hgetall(key)
    return found


def assert_one_place(jobs: Jobs, queue: str = QUEUE) -> dict[str, str]:
    """Invariant 2: every row is in exactly one place, the one its state names.

    Also no place holds an id without a row. Returns id -> state.
    """
    places = members(jobs, queue)
    where: dict[str, list[str]] = {}
    for state, ids in places.items():
        for job_id in ids:
            where.setdefault(job_id, []).append(state)
    all_rows = rows(jobs, queue)
    assert set(where) == set(all_rows), "a place holds an id without a row, or a row is nowhere"
    for job_id, found_in in where.items():
        assert found_in == [all_rows[job_id]["state"]], (job_id, found_in, all_rows[job_id])
    return {job_id: r["state"] for job_id, r in all_rows.items()}


def dump(client) -> dict[str, Any]:
    """Every key of the server with its type and full value: a before/after snapshot."""
    readers = {
        "string": client.get,
        "hash": client.hgetall,
        "zset": lambda k: client.zrange(k, 0, -1, withscores=True),
        "set": lambda k: sorted(client.smembers(k)),
        "list": lambda k: client.lrange(k, 0, -1),
    }
    snapshot = {}
    for key in client.scan_iter():
        kind = client.type(key)
        snapshot[key] = (kind, readers[kind](key))
    return snapshot
