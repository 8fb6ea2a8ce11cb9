"""A key of another type at the queue registry (``emq:queues``): bookkeeping, not a gate.

Every enqueue records its queue there, and a discovering reaper reads it. A planted
key used to fail every enqueue of every process with a bare WRONGTYPE ``ScriptError``
(the job never stored), and every reaper tick before it swept anything, the queues
it was given too. Now the jobs are stored and the problem is logged once; reading the
registry is ``CorruptKey`` naming it; the reaper sweeps the queues it was given.
"""

from __future__ import annotations

import logging
import time

import pytest

from echomq_django.engine.errors import CorruptKey
from echomq_django.engine.keyspace import QUEUES_KEY
from echomq_django.engine.reaper import Reaper

from .conftest import QUEUE, dump, new

PLANTS = {
    "string": lambda client: client.set(QUEUES_KEY, "planted"),
    "hash": lambda client: client.hset(QUEUES_KEY, "q", "1"),
    "list": lambda client: client.rpush(QUEUES_KEY, "q"),
}


@pytest.fixture(params=list(PLANTS))
def corrupt_registry(request, jobs):
    client = jobs.connector.client
    client.delete(QUEUES_KEY)
    PLANTS[request.param](client)
    return client.dump(QUEUES_KEY)


def test_enqueues_store_their_jobs_and_the_problem_is_logged_once(jobs, corrupt_registry, caplog):
    with caplog.at_level(logging.ERROR, logger="echomq.registry"):
        one = jobs.enqueue(QUEUE, new())
        many = jobs.enqueue_many("other", [new(), new()])
        again = jobs.enqueue(QUEUE, new())
    assert [jobs.get(QUEUE, e.id).state for e in (one, again)] == ["pending"] * 2
    assert [jobs.get("other", e.id).state for e in many] == ["pending"] * 2
    told = [r for r in caplog.records if r.name == "echomq.registry"]
    assert len(told) == 1 and QUEUES_KEY in told[0].getMessage()
    assert jobs.connector.client.dump(QUEUES_KEY) == corrupt_registry  # left for the operator


def test_reading_it_is_a_corrupt_key_naming_it_and_changes_nothing(jobs, corrupt_registry):
    before = dump(jobs.connector.client)
    with pytest.raises(CorruptKey, match="emq:queues holds another type than a set"):
        jobs.queues()
    assert dump(jobs.connector.client) == before


def test_a_reaper_sweeps_the_queues_it_was_given_and_logs_it_once(jobs, corrupt_registry, caplog):
    jobs.enqueue(QUEUE, new())
    jobs.claim(QUEUE, "gone", lease_ms=1)
    time.sleep(0.005)
    reaper = Reaper(jobs, [QUEUE], discover=True)
    with caplog.at_level(logging.ERROR, logger="echomq.reaper"):
        sweeps = [reaper.tick() for _ in range(3)]
    assert [s.queue for s in sweeps[0]] == [QUEUE] and sweeps[0][0].reaped.moved == 1
    told = [r for r in caplog.records if r.name == "echomq.reaper"]
    assert len(told) == 1 and "sweeping only the queues given: ['q']" in told[0].getMessage()

    jobs.connector.client.delete(QUEUES_KEY)  # repaired: discovery is back
    jobs.register_queue("found")
    assert reaper.queues_to_sweep() == [QUEUE, "found"]
