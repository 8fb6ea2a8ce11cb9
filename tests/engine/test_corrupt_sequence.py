"""A queue's sequence that is no whole number: every script that takes from it refuses.

enqueue, a schedule's fire and its run-now take numbers from the sequence before their
first write. A key of another type there, or a string that is no number, used to fail
them with a bare WRONGTYPE / "not an integer" ``ScriptError`` naming no key; they now
answer ``CorruptKey`` naming it, and nothing changes. An enqueue that stores nothing
(every job refused: an id that exists, a key's holder of another type) leaves the
sequence as it was: the keyspace is byte for byte the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from echomq_django.engine.errors import CorruptKey, JobExists
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.scheduler import Scheduler
from tests.schedules.conftest import backdate, every

from .conftest import QUEUE, dump, new

K = QueueKeys.of(QUEUE)


def server_ms(client) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


PLANTS: dict[str, Callable[[Any], Any]] = {
    "hash": lambda client: client.hset(K.seq, "planted", "1"),
    "word": lambda client: client.set(K.seq, "not a number"),
    "float": lambda client: client.set(K.seq, "12.5"),
    "negative": lambda client: client.set(K.seq, "-3"),
    "huge": lambda client: client.set(K.seq, "9" * 19),
}


@pytest.mark.parametrize("plant", list(PLANTS.values()), ids=list(PLANTS))
def test_enqueue_over_a_corrupt_sequence_is_a_corrupt_key(jobs, plant):
    jobs.enqueue(QUEUE, new())
    jobs.connector.client.delete(K.seq)
    plant(jobs.connector.client)
    before = dump(jobs.connector.client)
    for call in (
        lambda: jobs.enqueue(QUEUE, new()),
        lambda: jobs.enqueue_many(QUEUE, [new(), new(due_ms=2**42)]),
    ):
        with pytest.raises(CorruptKey, match=r"emq:\{q\}:seq"):
            call()
        assert dump(jobs.connector.client) == before


@pytest.mark.parametrize("plant", list(PLANTS.values()), ids=list(PLANTS))
def test_a_schedules_run_now_over_a_corrupt_sequence_is_a_corrupt_key(jobs, plant):
    scheduler = Scheduler(jobs)
    scheduler.sync([every("beat", QUEUE)])
    plant(jobs.connector.client)
    before = dump(jobs.connector.client)
    with pytest.raises(CorruptKey, match=r"emq:\{q\}:seq"):
        scheduler.run_now(QUEUE, "beat")
    assert dump(jobs.connector.client) == before


@pytest.mark.parametrize("plant", list(PLANTS.values()), ids=list(PLANTS))
def test_a_fire_over_a_corrupt_sequence_is_a_corrupt_key(jobs, plant, caplog):
    scheduler = Scheduler(jobs)
    scheduler.sync([every("beat", QUEUE)])
    backdate(jobs.connector.client, QUEUE, "beat", server_ms(jobs.connector.client) - 1500)
    plant(jobs.connector.client)
    before = dump(jobs.connector.client)
    assert scheduler.fire_due([QUEUE]).fired == []
    assert dump(jobs.connector.client) == before
    assert "CorruptKey" in caplog.text or "emq:{q}:seq holds" in caplog.text, caplog.text


def test_an_enqueue_that_stores_nothing_leaves_the_sequence_as_it_was(jobs):
    job_id = jobs.enqueue(QUEUE, new()).id
    before = dump(jobs.connector.client)
    with pytest.raises(JobExists):
        jobs.enqueue(QUEUE, new(id=job_id))
    assert dump(jobs.connector.client) == before
