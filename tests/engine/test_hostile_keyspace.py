"""Every transition over every hostile key or row field: all or nothing, invariants kept.

Redis rolls back none of a script's writes when a later command raises, so a transition
is atomic only if it fails before its first write or cannot fail after it. This walks
that class for each transition through the Python API: over a queue with a job in every
place (and ones waiting on gates, holding debounce and throttle keys, a due schedule),
it plants one hostile thing at a time (a key of another type at each key the queue has
or a script builds, or a field of the rows the call reads set to a word, a negative, a
number Lua reads as infinite, bytes that are not UTF-8, or removed) and calls. Either
the call raises one of the engine's typed errors (never a bare ``ScriptError``, a
``ValueError``) and the keyspace is byte for byte as it was, or it ran and the queue's
invariants (``keyspace_invariants``) hold as they held before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from echomq_django.engine.errors import EchoMQError, ScriptError
from echomq_django.engine.keyspace import QueueKeys

from . import keyspace_invariants
from .conftest import QUEUE
from .hostile_scene import NAMES, Scene, dump, operations, restore, server_ms, snapshot

K = QueueKeys.of(QUEUE)
VALUES: tuple[Any, ...] = ("x", "-1", "1e400", b"\xff\xfe", None)  # None: the field removed
# Opaque to the scripts (carried, never read as a number or a state).
OPAQUE = {b"payload", b"task", b"errors", b"last_error", b"run_after", b"id", b"worker_ids"}


def plants(raw, rows: tuple[str, ...]) -> Iterator[tuple[str, Callable[[], Any]]]:
    """(what is planted, how): one hostile key or field at a time."""
    minute = server_ms(raw) // 60_000
    built = [K.seq, K.wake, K.metrics, K.limits, K.events, K.base + "tokens", K.schedules]
    built += [K.throughput(minute), K.throughput(minute + 1), K.claim("c1")]
    for key in sorted({*(k.decode() for k in raw.scan_iter()), *built}):
        yield f"another type at {key}", lambda key=key: plant_another_type(raw, key)
    for job_id in rows:
        for field in sorted(set(raw.hkeys(K.job(job_id))) - OPAQUE):
            for value in VALUES:

                def plant(field=field, value=value, job_id=job_id):
                    row = K.job(job_id)
                    return raw.hdel(row, field) if value is None else raw.hset(row, field, value)

                yield f"{field.decode()}={value!r} in {job_id}", plant


def plant_another_type(raw, key: str) -> None:
    string = raw.type(key) in (b"string", b"none")
    raw.delete(key)
    if string:
        raw.hset(key, "planted", "1")
    else:
        raw.set(key, "planted")


@pytest.mark.parametrize("name", NAMES)
def test_a_transition_over_hostile_state_is_all_or_nothing(
    jobs, standalone, redis_client, server_kind, name
):
    if server_kind == "redis":  # the guards are the scripts' own Lua (test_oom_transitions
        pytest.skip("run on Valkey (the same Lua on Redis adds only time)")  # runs on both)
    scene = Scene.build(jobs)
    call, rows = operations(scene)[name]
    clean = snapshot(redis_client)
    found = []
    for what, plant in list(plants(redis_client, rows)):
        restore(redis_client, clean)
        plant()
        sound = not keyspace_invariants.violations(jobs.connector.client, QUEUE)
        before = dump(redis_client)
        try:
            call()
        except Exception as exc:
            if not isinstance(exc, EchoMQError) or type(exc) is ScriptError:
                found.append(f"{what}: an unclear {type(exc).__name__}: {exc}")
            if dump(redis_client) != before:
                found.append(f"{what}: {type(exc).__name__} ({exc}) after writes")
            continue
        broken = keyspace_invariants.violations(jobs.connector.client, QUEUE)
        if sound and broken:
            found.append(f"{what}: ran, and now {broken}")
    assert not found, "\n".join(found)


def test_the_scene_is_sound(jobs):
    Scene.build(jobs)
    keyspace_invariants.assert_sound(jobs.connector.client, QUEUE)
