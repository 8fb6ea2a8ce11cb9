"""Every input is accepted and round-trips exactly, or is refused with a typed error first.

Hypothesis draws queue names, job ids, payloads and enqueue options from wide
strategies (any text, lone surrogates included; any Python value where an int
is wanted). For each example the whole keyspace is dumped before the call: a
refusal must be one of the engine's typed errors and leave the dump unchanged;
an acceptance must store exactly what was given. The server is flushed per
example (hence the function-scoped fixture health check is off).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq_django.engine.errors import (
    InvalidJobId,
    InvalidJobOptions,
    InvalidQueueName,
    PayloadTooLarge,
)
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys, new_job_id
from tests.chaos import snapshot

MAX_PAYLOAD = 256
Q = "props"

per_example = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Any code point, surrogates included: st.text() leaves them out by default.
any_char = st.characters(codec=None, exclude_categories=())
any_text = st.text(any_char, max_size=120)
queue_names = st.one_of(
    any_text,
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,110}", fullmatch=True),
    st.sampled_from(["a{b}", "q:x", "{q}", "q q", "é", "-q", "q\n", "a" * 100, "a" * 101]),
)
job_ids = st.one_of(
    any_text,
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.builds(new_job_id),
    st.builds(new_job_id).map(lambda j: j.upper()),
    st.builds(new_job_id).map(lambda j: j + " "),
)
not_an_int = st.one_of(st.booleans(), st.none(), st.floats(), any_text, st.just([1]))
ints = st.one_of(st.integers(-(2**64), 2**64), st.integers(-200, 200), not_an_int)


@pytest.fixture
def jobs(connector) -> Jobs:
    return Jobs(connector, max_payload=MAX_PAYLOAD)


def _unchanged_or_stored(raw, call, refusals: tuple[type[Exception], ...]):
    """Run ``call`` on a flushed server: return its result, or None after a clean refusal."""
    raw.flushall()
    before = snapshot.dump(raw)
    try:
        return call()
    except refusals:
        assert snapshot.dump(raw) == before, "a refused call wrote something"
        return None


@per_example
@given(name=queue_names)
def test_queue_names(jobs: Jobs, redis_client, name):
    jobs = Jobs(jobs.connector)  # a fresh process view: the queue registry is written once per Jobs
    job = NewJob(payload="{}")
    stored = _unchanged_or_stored(
        redis_client, lambda: jobs.enqueue(name, job), (InvalidQueueName,)
    )
    if stored is None:
        return
    # Accepted: the name cannot break out of its hash tag or the key layout.
    assert not any(ch in name for ch in "{}: \t\r\n\x00") and name.isascii()
    assert jobs.get(name, job.id).queue == name
    created = {k.decode() for k in redis_client.keys("*")} - {"emq:queues"}
    assert created and all(k.startswith(QueueKeys.of(name).base) for k in created)
    assert redis_client.smembers("emq:queues") == {name.encode()}


@per_example
@given(job_id=job_ids)
def test_job_ids(jobs: Jobs, redis_client, job_id):
    stored = _unchanged_or_stored(
        redis_client, lambda: jobs.enqueue(Q, NewJob(id=job_id, payload="{}")), (InvalidJobId,)
    )
    if stored is None:
        for read in (jobs.get, jobs.cancel, jobs.delete, jobs.run_now):
            with pytest.raises(InvalidJobId):
                read(Q, job_id)
        return
    assert stored.id == job_id
    assert jobs.get(Q, job_id).id == job_id


@per_example
@given(
    payload=st.one_of(
        any_text, st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("latin-1"))
    )
)
def test_payloads(jobs: Jobs, redis_client, payload):
    stored = _unchanged_or_stored(
        redis_client, lambda: jobs.enqueue(Q, NewJob(payload=payload)), (InvalidJobOptions,)
    )
    if stored is None:
        encodable = not any(0xD800 <= ord(ch) <= 0xDFFF for ch in payload)
        assert not encodable or len(payload.encode()) > MAX_PAYLOAD
        return
    assert len(payload.encode()) <= MAX_PAYLOAD
    assert jobs.get(Q, stored.id).payload == payload


def test_the_payload_limit_is_exact(jobs: Jobs, redis_client):
    jobs.enqueue(Q, NewJob(payload="é" * (MAX_PAYLOAD // 2)))  # 2 bytes each: exactly the limit
    before = snapshot.dump(redis_client)
    with pytest.raises(PayloadTooLarge, match=f"{MAX_PAYLOAD + 1} bytes"):
        jobs.enqueue(Q, NewJob(payload="x" * (MAX_PAYLOAD + 1)))
    assert snapshot.dump(redis_client) == before


@per_example
@given(
    priority=ints,
    max_attempts=ints,
    lease_ms=ints,
    due_ms=st.one_of(ints, st.integers(0, 2**53)),
    result_ttl_ms=ints,
    dead_ttl_ms=ints,
    task=st.one_of(any_text, st.from_regex(r"[a-z_.]{1,40}", fullmatch=True)),
    run_after=st.one_of(any_text, st.text(max_size=110)),
    idem=st.one_of(st.none(), any_text, st.text(min_size=995, max_size=1005)),
)
def test_options(jobs: Jobs, redis_client, **options):
    idem = options.pop("idem")
    job = NewJob(payload="{}", idempotency_key=idem, **options)
    stored = _unchanged_or_stored(redis_client, lambda: jobs.enqueue(Q, job), (InvalidJobOptions,))
    if stored is None:
        return
    row = jobs.get(Q, job.id)
    for name in ("priority", "max_attempts", "lease_ms", "task", "run_after", "result_ttl_ms"):
        assert getattr(row, name) == getattr(job, name), name
        assert type(getattr(job, name)) in (int, str)
    raw = redis_client.hgetall(QueueKeys.of(Q).job(job.id))
    assert int(raw[b"dead_ttl_ms"]) == job.dead_ttl_ms
    assert row.state == ("scheduled" if row.due_ms else "pending")
    if row.state == "scheduled":
        assert row.due_ms == job.due_ms
    if idem is not None:
        again = jobs.enqueue(Q, NewJob(payload="[]", idempotency_key=idem))
        assert (again.id, again.created) == (job.id, False)
