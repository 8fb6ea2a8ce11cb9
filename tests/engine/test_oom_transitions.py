"""Every transition on a server out of memory (noeviction) does all of its work or none.

A script without flags is refused at its first write that may grow memory, unless it
wrote already (then the server lets it finish); ``#!lua flags=allow-oom`` scripts run.
So a transition is all or nothing under OOM only if no write of it is skipped quietly
(a pcall swallowing the OOM of a write that comes before the first real one). On a
server of its own, each transition of the hostile scene (``hostile_scene``) runs twice from
the same keyspace: with room, and at ``maxmemory 1``. At OOM it either raises a typed
error and changes nothing (a fire pass logs the schedule it could not fire), or it did
everything the run with room did (the same keys, row fields, states and members; times
and counters aside).
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq_django.devserver import EmbeddedServer
from echomq_django.engine.connector import Connector
from echomq_django.engine.errors import EchoMQError, ScriptError
from echomq_django.engine.jobs import Jobs

from .hostile_scene import NAMES, Scene, dump, operations, restore, snapshot

# Best-effort bookkeeping (common.lua's bump, the throughput chart, the event stream):
# losing it under OOM loses a count, never a job.
BOOKKEEPING = (b":tp:", b":metrics", b":events")


@pytest.fixture(scope="module")
def own_server(server):
    if not isinstance(server, EmbeddedServer):
        pytest.skip("needs a standalone server of its own")
    own = EmbeddedServer(binary=server.binary, extra_args=["--maxmemory-policy", "noeviction"])
    yield own.start()
    own.stop()


@pytest.fixture
def on_own(own_server):
    raw = redis.Redis.from_url(own_server.url)
    raw.flushall()
    jobs = Jobs(Connector.from_url(own_server.url))
    yield jobs, raw
    raw.config_set("maxmemory", "0")
    jobs.connector.close()
    raw.close()


def shape(raw) -> dict[bytes, Any]:
    """What a transition did, apart from its times and counts."""
    found: dict[bytes, Any] = {}
    for key in raw.scan_iter():
        if any(part in key for part in BOOKKEEPING):
            continue
        kind = raw.type(key)
        if kind == b"hash":
            found[key] = (kind, sorted(raw.hkeys(key)), raw.hget(key, "state"))
        elif kind == b"zset":
            found[key] = (kind, sorted(raw.zrange(key, 0, -1)))
        else:
            found[key] = (kind,)
    return found


def run(call) -> Exception | None:
    try:
        call()
    except Exception as exc:
        return exc
    return None


@pytest.mark.parametrize("name", NAMES)
def test_a_transition_out_of_memory_does_all_or_nothing(on_own, name):
    jobs, raw = on_own
    scene = Scene.build(jobs)
    call, _ = operations(scene)[name]
    clean = snapshot(raw)
    with_room = run(call)
    expected = shape(raw)
    restore(raw, clean)
    before = dump(raw)
    raw.config_set("maxmemory", "1")
    try:
        failed = run(call)
    finally:
        raw.config_set("maxmemory", "0")
    if failed is not None:
        assert isinstance(failed, EchoMQError) and type(failed) is not ScriptError, failed
        assert dump(raw) == before, failed
    elif dump(raw) != before:  # (a fire pass logs a schedule it could not fire)
        assert with_room is None, with_room
        assert shape(raw) == expected
