"""Bad input gets its typed error and leaves the server untouched; corrupt rows are survived.

Every malformed queue name, job id, worker id, payload or option is refused before
anything is sent: a full dump of the server's keyspace is the same afterwards.
Rows planted into the server behind the engine's back are handled by claim
without losing a job and without an error that would stop the script halfway
(Redis does not roll back the writes a failing script already made).
"""

from __future__ import annotations

import time
import uuid

import pytest

from echomq_django.engine.errors import (
    CorruptKey,
    InvalidJobId,
    InvalidJobOptions,
    InvalidQueueName,
    InvalidWorkerId,
    PayloadTooLarge,
)
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys

from .conftest import QUEUE, WORKER, assert_one_place, dump, enqueue_n, error_json, new, row

BAD_QUEUES = {
    "braces": "a{b}",
    "colon": "a:b",
    "space": "a b",
    "tab": "a\tb",
    "newline": "a\nb",
    "nul": "a\x00b",
    "control": "a\x1bb",
    "empty": "",
    "too long": "q" * 101,
    "leading dot": ".q",
    "non-ascii": "qé",
    "int": 5,
    "bytes": b"q",
    "none": None,
}

BAD_JOB_IDS = {
    "uppercase": str(uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057")).upper(),
    "uuid4": str(uuid.uuid4()),
    "short": "01890a5d-ac96-774b-bcce-b302099a805",
    "long": "01890a5d-ac96-774b-bcce-b302099a80577",
    "no dashes": "01890a5dac96774bbcceb302099a8057",
    "braces": "{1890a5d-ac96-774b-bcce-b302099a8057}",
    "bad variant": "01890a5d-ac96-774b-7cce-b302099a8057",
    "int": 12,
    "uuid object": uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057"),
    "none": None,
}

BAD_WORKERS = {
    "space": "w 1",
    "quote": 'w"1',
    "backslash": "w\\1",
    "newline": "w\n1",
    "empty": "",
    "too long": "w" * 201,
    "non-ascii": "wé",
    "int": 1,
    "none": None,
}

GOOD_ID = "01890a5d-ac96-774b-bcce-b302099a8057"


@pytest.fixture
def populated(jobs) -> None:
    """A queue with a job in each of active, pending, dead and scheduled (GOOD_ID)."""
    dead = enqueue_n(jobs, 3)[2]
    jobs.claim(QUEUE, WORKER)
    jobs.cancel(QUEUE, dead)
    jobs.enqueue(QUEUE, new(id=GOOD_ID, due_ms=2**42))


def queue_operations(jobs: Jobs, q: object) -> dict[str, object]:
    return {
        "enqueue": lambda: jobs.enqueue(q, new()),
        "enqueue_many": lambda: jobs.enqueue_many(q, [new()]),
        "claim": lambda: jobs.claim(q, WORKER),
        "complete": lambda: jobs.complete(q, GOOD_ID, 1),
        "retry": lambda: jobs.retry(q, GOOD_ID, 1, error=error_json(), summary="x"),
        "extend": lambda: jobs.extend(q, GOOD_ID, 1, 1000),
        "release": lambda: jobs.release(q, GOOD_ID, 1),
        "reap": lambda: jobs.reap(q),
        "promote": lambda: jobs.promote(q),
        "trim": lambda: jobs.trim(q, "dead", purge=True),
        "retry_dead": lambda: jobs.retry_dead(q),
        "run_now": lambda: jobs.run_now(q, GOOD_ID),
        "cancel": lambda: jobs.cancel(q, GOOD_ID),
        "delete": lambda: jobs.delete(q, GOOD_ID),
        "get": lambda: jobs.get(q, GOOD_ID),
        "stats": lambda: jobs.stats(q),
        "page": lambda: jobs.page(q, "pending"),
        "throughput": lambda: jobs.throughput(q),
        "register_queue": lambda: jobs.register_queue(q),
    }


def job_id_operations(jobs: Jobs, job_id: object) -> dict[str, object]:
    return {
        "enqueue": lambda: jobs.enqueue(QUEUE, new(id=job_id)),
        "complete": lambda: jobs.complete(QUEUE, job_id, 1),
        "complete_many": lambda: jobs.complete_many([(QUEUE, job_id, 1, "null")]),
        "retry": lambda: jobs.retry(QUEUE, job_id, 1, error=error_json(), summary="x"),
        "extend": lambda: jobs.extend(QUEUE, job_id, 1, 1000),
        "extend_many": lambda: jobs.extend_many([(QUEUE, job_id, 1, 1000)]),
        "release": lambda: jobs.release(QUEUE, job_id, 1),
        "run_now": lambda: jobs.run_now(QUEUE, job_id),
        "cancel": lambda: jobs.cancel(QUEUE, job_id),
        "delete": lambda: jobs.delete(QUEUE, job_id),
        "get": lambda: jobs.get(QUEUE, job_id),
        "retry_dead": lambda: jobs.retry_dead(QUEUE, [GOOD_ID, job_id]),
    }


def refused(jobs: Jobs, call, error: type[Exception]) -> None:
    """``call`` raises ``error`` and the server's keyspace is exactly as before."""
    client = jobs.connector.client
    before = dump(client)
    with pytest.raises(error):
        call()
    assert dump(client) == before


@pytest.mark.parametrize("name", BAD_QUEUES)
def test_bad_queue_names_are_refused_by_every_operation(jobs, populated, name):
    for operation in queue_operations(jobs, BAD_QUEUES[name]).values():
        refused(jobs, operation, InvalidQueueName)


@pytest.mark.parametrize("name", BAD_JOB_IDS)
def test_bad_job_ids_are_refused_by_every_operation(jobs, populated, name):
    for operation in job_id_operations(jobs, BAD_JOB_IDS[name]).values():
        refused(jobs, operation, InvalidJobId)


@pytest.mark.parametrize("name", BAD_WORKERS)
def test_bad_worker_ids_are_refused(jobs, populated, name):
    refused(jobs, lambda: jobs.claim(QUEUE, BAD_WORKERS[name]), InvalidWorkerId)


@pytest.mark.parametrize(
    ("label", "fields"),
    [
        ("payload bytes", {"payload": b"{}"}),
        ("payload dict", {"payload": {"a": 1}}),
        ("payload none", {"payload": None}),
        ("payload lone surrogate", {"payload": "\ud800"}),
        ("priority too high", {"priority": 101}),
        ("priority too low", {"priority": -101}),
        ("priority bool", {"priority": True}),
        ("priority str", {"priority": "1"}),
        ("priority float", {"priority": 1.5}),
        ("max_attempts zero", {"max_attempts": 0}),
        ("max_attempts negative", {"max_attempts": -3}),
        ("lease negative", {"lease_ms": -1}),
        ("lease over a week", {"lease_ms": 7 * 24 * 3600 * 1000 + 1}),
        ("due negative", {"due_ms": -1}),
        ("task with newline", {"task": "a\nb"}),
        ("task with quote", {"task": 'a"b'}),
        ("run_after too long", {"run_after": "x" * 101}),
        ("empty idempotency key", {"idempotency_key": ""}),
        ("result ttl negative", {"result_ttl_ms": -1}),
    ],
)
def test_bad_job_options_are_refused(jobs, populated, label, fields):
    job = NewJob(**{"payload": "{}", **fields})
    refused(jobs, lambda: jobs.enqueue(QUEUE, job), InvalidJobOptions)
    refused(jobs, lambda: jobs.enqueue_many(QUEUE, [new(), job]), InvalidJobOptions)


def test_a_payload_over_the_limit_is_refused(connector):
    small = Jobs(connector, max_payload=16)
    refused(small, lambda: small.enqueue(QUEUE, new("x" * 17)), PayloadTooLarge)
    assert small.enqueue(QUEUE, new("x" * 16)).created


@pytest.mark.parametrize(
    ("label", "call"),
    [
        ("claim count 0", lambda j: j.claim(QUEUE, WORKER, count=0)),
        ("claim count too big", lambda j: j.claim(QUEUE, WORKER, count=10_001)),
        ("claim lease 0", lambda j: j.claim(QUEUE, WORKER, lease_ms=0)),
        ("claim promote_limit -1", lambda j: j.claim(QUEUE, WORKER, promote_limit=-1)),
        ("extend lease 0", lambda j: j.extend(QUEUE, GOOD_ID, 1, 0)),
        ("reap limit 0", lambda j: j.reap(QUEUE, limit=0)),
        ("reap limit -1", lambda j: j.reap(QUEUE, limit=-1)),
        ("promote limit 0", lambda j: j.promote(QUEUE, limit=0)),
        ("trim limit 0", lambda j: j.trim(QUEUE, "dead", limit=0)),
        ("trim pending", lambda j: j.trim(QUEUE, "pending")),
        ("retry_dead limit -1", lambda j: j.retry_dead(QUEUE, limit=-1)),
        ("retry error not json", lambda j: j.retry(QUEUE, GOOD_ID, 1, error="boom", summary="x")),
        ("retry error a list", lambda j: j.retry(QUEUE, GOOD_ID, 1, error="[1]", summary="x")),
        ("retry summary none", lambda j: j.retry(QUEUE, GOOD_ID, 1, error="{}", summary=None)),
        (
            "retry backoff past 2**40 ms",  # the script's '%d' of now + 1e20 wrapped to -2**63
            lambda j: j.retry(QUEUE, GOOD_ID, 1, error="{}", summary="x", backoff_ms=10**20),
        ),
        (
            "retry backoff negative",
            lambda j: j.retry(QUEUE, GOOD_ID, 1, error="{}", summary="x", backoff_ms=-1),
        ),
        ("cancel reason newline", lambda j: j.cancel(QUEUE, GOOD_ID, "a\nb")),
        ("cancel reason quote", lambda j: j.cancel(QUEUE, GOOD_ID, 'a"b')),
        ("page count 0", lambda j: j.page(QUEUE, "pending", count=0)),
        ("page count 501", lambda j: j.page(QUEUE, "pending", count=501)),
        ("page offset -1", lambda j: j.page(QUEUE, "pending", offset=-1)),
        ("throughput 0 minutes", lambda j: j.throughput(QUEUE, minutes=0)),
        ("throughput 121 minutes", lambda j: j.throughput(QUEUE, minutes=121)),
    ],
)
def test_bad_operation_options_are_refused(jobs, populated, label, call):
    refused(jobs, lambda: call(jobs), InvalidJobOptions)


def test_page_of_an_unknown_place_is_a_value_error(jobs, populated):
    refused(jobs, lambda: jobs.page(QUEUE, "elsewhere"), ValueError)


# -- corrupt rows planted into the server -----------------------------------------------------


def plant(jobs: Jobs, fields: dict[str, str], *, in_pending: bool = True) -> str:
    """Write a row behind the engine's back, and put its id at the front of pending."""
    job_id = NewJob(payload="").id
    keys = QueueKeys.of(QUEUE)
    client = jobs.connector.client
    if fields:
        client.hset(keys.job(job_id), mapping={"id": job_id, "payload": "{}", **fields})
    if in_pending:
        client.zadd(keys.pending, {job_id: 0})
    return job_id


def test_claim_dead_letters_a_row_whose_attempts_is_not_an_integer(jobs):
    good = enqueue_n(jobs, 2)
    bad = plant(jobs, {"state": "pending", "attempts": "many", "max_attempts": "3"})
    claim = jobs.claim(QUEUE, WORKER, count=3)
    assert [c.id for c in claim.jobs] == good  # the rest of the batch was claimed
    dead = row(jobs, bad)
    assert (dead["state"], dead["last_error"]) == ("dead", "CorruptRow: attempts is not an integer")
    assert "echomq_django.engine.errors.CorruptRow" in dead["errors"]
    assert assert_one_place(jobs) == {good[0]: "active", good[1]: "active", bad: "dead"}


def test_claim_drops_an_id_without_a_row_and_repairs_pending(jobs):
    good = enqueue_n(jobs, 2)
    ghost = plant(jobs, {})
    claim = jobs.claim(QUEUE, WORKER, count=3)
    assert [c.id for c in claim.jobs] == good
    assert jobs.stats(QUEUE).metrics["dangling"] == 1
    assert ghost not in assert_one_place(jobs)


def test_claim_takes_a_row_with_an_unknown_state_into_one_place(jobs):
    good = enqueue_n(jobs, 1)
    odd = plant(jobs, {"state": "bogus", "attempts": "0", "priority": "high", "lease_ms": "soon"})
    claim = jobs.claim(QUEUE, WORKER, count=2, lease_ms=5000)
    assert [c.id for c in claim.jobs] == [odd, *good]
    taken = claim.jobs[0]
    assert taken.job is None and "priority" in taken.corrupt  # the worker is told why
    assert row(jobs, odd)["lease_deadline"] == str(claim.now_ms + 5000)  # lease_ms fell back
    assert assert_one_place(jobs) == {odd: "active", good[0]: "active"}
    jobs.complete(QUEUE, odd, taken.token)


def test_claim_survives_a_foreign_key_where_a_row_should_be(jobs):
    """A non-hash at a row key: the id is dropped, nothing else is lost, the key is left alone."""
    good = enqueue_n(jobs, 2)
    alien = plant(jobs, {})
    jobs.connector.client.set(QueueKeys.of(QUEUE).job(alien), "not a hash")
    claim = jobs.claim(QUEUE, WORKER, count=3)
    assert [c.id for c in claim.jobs] == good
    assert jobs.connector.client.get(QueueKeys.of(QUEUE).job(alien)) == "not a hash"
    assert jobs.connector.client.zscore(QueueKeys.of(QUEUE).pending, alien) is None


def test_reap_and_retry_survive_corrupt_counters(jobs):
    job_id = jobs.enqueue(QUEUE, new()).id
    key = QueueKeys.of(QUEUE).job(job_id)
    jobs.connector.client.hset(key, mapping={"max_attempts": "lots", "solo": "1"})
    jobs.claim(QUEUE, WORKER, lease_ms=1)
    jobs.start_many(WORKER, [(QUEUE, job_id, 1)])  # it ran alone: its crash is charged
    jobs.connector.client.hset(
        key, mapping={"dead_ttl_ms": "forever", "crashes": "lots", "refunds": "none"}
    )
    time.sleep(0.005)
    sweep = jobs.reap(QUEUE, crash_budget=1)
    assert (sweep.moved, sweep.dead) == (0, 1)  # an unreadable crash count reads as none
    assert assert_one_place(jobs) == {job_id: "dead"}
    assert row(jobs, job_id)["state"] == "dead"


def plant_alien(jobs: Jobs, place: str, score: float = 0) -> str:
    """A valid id in ``place`` whose row key holds a string: no command may fail on it."""
    alien = NewJob(payload="").id
    keys = QueueKeys.of(QUEUE)
    jobs.connector.client.set(keys.job(alien), "not a hash")
    jobs.connector.client.zadd(keys.state_set(place), {alien: score})
    return alien


def assert_alien_dropped(jobs: Jobs, alien: str, place: str) -> None:
    keys = QueueKeys.of(QUEUE)
    assert jobs.connector.client.get(keys.job(alien)) == "not a hash"  # left alone
    assert jobs.connector.client.zscore(keys.state_set(place), alien) is None  # set repaired


def test_reap_survives_a_foreign_key_where_a_row_should_be(jobs):
    """Before, HMGET failed mid-batch: the jobs before it were moved but never counted or woken."""
    good = enqueue_n(jobs, 2)
    jobs.claim(QUEUE, WORKER, count=2, lease_ms=1)
    alien = plant_alien(jobs, "active", score=1)
    time.sleep(0.005)
    sweep = jobs.reap(QUEUE)
    assert (sweep.moved, sweep.dead, sweep.dangling) == (2, 0, 1)
    assert jobs.stats(QUEUE).metrics["reaped"] == 2
    assert jobs.connector.client.zcard(QueueKeys.of(QUEUE).wake) == 1
    assert_alien_dropped(jobs, alien, "active")
    assert {g: row(jobs, g)["state"] for g in good} == dict.fromkeys(good, "pending")


@pytest.mark.parametrize("place", ["completed", "dead"])
def test_trim_survives_a_foreign_key_where_a_row_should_be(jobs, place):
    good = enqueue_n(jobs, 1)[0]
    claimed = jobs.claim(QUEUE, WORKER).jobs[0]
    if place == "completed":
        jobs.complete(QUEUE, good, claimed.token)
    else:
        jobs.retry(QUEUE, good, claimed.token, error=error_json(), summary="x", give_up=True)
    alien = plant_alien(jobs, place)
    assert jobs.trim(QUEUE, place, purge=True).moved == 2
    assert_alien_dropped(jobs, alien, place)
    assert row(jobs, good) == {}


@pytest.mark.parametrize("by_id", [False, True], ids=["all", "by id"])
def test_retry_dead_survives_a_foreign_key_where_a_row_should_be(jobs, by_id):
    good = enqueue_n(jobs, 1)[0]
    claimed = jobs.claim(QUEUE, WORKER).jobs[0]
    jobs.retry(QUEUE, good, claimed.token, error=error_json(), summary="x", give_up=True)
    alien = plant_alien(jobs, "dead")
    sweep = jobs.retry_dead(QUEUE, [alien, good] if by_id else ())
    assert sweep.moved == 1
    assert jobs.stats(QUEUE).metrics["revived"] == 1
    assert_alien_dropped(jobs, alien, "dead")
    assert row(jobs, good)["state"] == "pending"


def test_a_page_shows_a_foreign_key_where_a_row_should_be_as_a_missing_row(jobs):
    good = enqueue_n(jobs, 1)[0]
    alien = plant_alien(jobs, "pending")
    page = jobs.page(QUEUE, "pending", fields=("task",))
    assert {e.id: e.fields["task"] for e in page.entries} == {alien: None, good: "tests.task"}


@pytest.mark.parametrize("lease", ["inf", "nan", "1e400", "-5", "0x7fffffffffffffff"])
def test_claim_falls_back_to_the_default_lease_for_a_lease_no_enqueue_allows(jobs, lease):
    """Lua reads 'inf' and 'nan' as numbers; '%d' made the deadline -2**63: reaped at once."""
    odd = plant(jobs, {"state": "pending", "attempts": "0", "lease_ms": lease})
    claim = jobs.claim(QUEUE, WORKER, lease_ms=5000)
    assert [c.id for c in claim.jobs] == [odd]
    assert row(jobs, odd)["lease_deadline"] == str(claim.now_ms + 5000)
    assert jobs.reap(QUEUE).moved == 0


def test_finishing_a_job_survives_a_foreign_key_at_its_idempotency_key(jobs):
    """Before, GET met WRONGTYPE after complete's moves: done, but never counted."""
    job_id = jobs.enqueue(QUEUE, new(idempotency_key="k")).id
    idem = QueueKeys.of(QUEUE).idempotency(row(jobs, job_id)["idem"])
    c = jobs.claim(QUEUE, WORKER).jobs[0]
    jobs.connector.client.delete(idem)
    jobs.connector.client.hset(idem, "planted", "1")
    jobs.complete(QUEUE, job_id, c.token)
    assert jobs.stats(QUEUE).metrics["completed"] == 1
    assert jobs.connector.client.hgetall(idem) == {"planted": "1"}  # left alone


def test_enqueue_over_a_corrupt_sequence_writes_nothing(jobs):
    """The sequence is taken before the first write: the script fails whole, not halfway."""
    enqueue_n(jobs, 1)
    jobs.connector.client.set(QueueKeys.of(QUEUE).seq, "not a number")
    refused(jobs, lambda: jobs.enqueue(QUEUE, new(idempotency_key="k")), CorruptKey)
