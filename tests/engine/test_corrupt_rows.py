"""A corrupt row, or a key of another type where a row or a key's holder should be.

Each transition that reads a job's row (or an idempotency key) before it writes refuses
one of another type with ``CorruptKey`` naming it, not a bare WRONGTYPE ``ScriptError``,
and changes nothing (enqueue's sequence may leave a gap, as a scheduled job does). A
holder row whose ``enqueued_at`` is not an integer used to fail the enqueue in Python
(``ValueError``) after a debounce had already moved the holder: the reply now carries no
time for it (``None``) and the call answers what it did.
"""

from __future__ import annotations

from typing import Any

import pytest

from echomq_django.engine.errors import CorruptKey
from echomq_django.engine.jobs import Jobs
from echomq_django.engine.keyspace import QueueKeys

from .conftest import QUEUE, WORKER, assert_one_place, dump, error_json, new, row

K = QueueKeys.of(QUEUE)


def without_seq(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The keyspace but the sequence, which enqueue takes before anything else."""
    return {key: value for key, value in snapshot.items() if key != K.seq}


def plant_string(jobs: Jobs, key: str) -> None:
    jobs.connector.client.delete(key)
    jobs.connector.client.set(key, "planted")


def held(jobs: Jobs) -> tuple[str, int]:
    jobs.enqueue(QUEUE, new())
    (claimed,) = jobs.claim(QUEUE, WORKER).jobs
    return claimed.id, claimed.token


def fenced_calls(jobs: Jobs, job_id: str, token: int) -> dict[str, Any]:
    def entry(entries: list[Any]) -> None:
        if isinstance(entries[0], Exception):
            raise entries[0]

    return {
        "complete": lambda: jobs.complete(QUEUE, job_id, token),
        "retry": lambda: jobs.retry(QUEUE, job_id, token, error=error_json(), summary="s"),
        "extend": lambda: jobs.extend(QUEUE, job_id, token, 5000),
        "release": lambda: jobs.release(QUEUE, job_id, token),
        "crashed": lambda: jobs.crashed(QUEUE, job_id, token, why="died"),
        "leave_many": lambda: entry(jobs.leave_many([(QUEUE, job_id, token)])),
        "start_many": lambda: entry(jobs.start_many(WORKER, [(QUEUE, job_id, token)])),
        "cancel": lambda: jobs.cancel(QUEUE, job_id),
    }


@pytest.mark.parametrize("operation", list(fenced_calls(None, "", 1)))  # type: ignore[arg-type]
def test_a_string_at_a_held_jobs_row_is_a_corrupt_key_and_changes_nothing(jobs, operation):
    job_id, token = held(jobs)
    plant_string(jobs, K.job(job_id))
    before = dump(jobs.connector.client)
    with pytest.raises(CorruptKey, match=K.job(job_id).replace("{", r"\{").replace("}", r"\}")):
        fenced_calls(jobs, job_id, token)[operation]()
    assert dump(jobs.connector.client) == before


@pytest.mark.parametrize("due", [0, 2**42], ids=["pending", "scheduled"])
def test_run_now_and_cancel_over_a_string_at_the_row_are_a_corrupt_key(jobs, due):
    job_id = jobs.enqueue(QUEUE, new(due_ms=due)).id
    plant_string(jobs, K.job(job_id))
    before = dump(jobs.connector.client)
    for call in (lambda: jobs.run_now(QUEUE, job_id), lambda: jobs.cancel(QUEUE, job_id)):
        with pytest.raises(CorruptKey):
            call()
        assert dump(jobs.connector.client) == before


KEYED = {"unique": {}, "debounce": {"debounce_ms": 60_000}, "throttle": {"throttle_ms": 60_000}}


@pytest.mark.parametrize("options", list(KEYED.values()), ids=list(KEYED))
@pytest.mark.parametrize("where", ["idempotency key", "holder's row"])
def test_a_key_of_another_type_at_a_keys_holder_is_a_corrupt_key(jobs, options, where):
    holder = jobs.enqueue(QUEUE, new(idempotency_key="k", **options)).id
    client = jobs.connector.client
    if where == "holder's row":
        client.delete(K.job(holder))
        client.sadd(K.job(holder), "planted")
    else:
        (idem,) = [
            k
            for k in client.scan_iter(
                match=K.base.replace("{", "\\{").replace("}", "\\}") + "idem:*"
            )
        ]
        client.delete(idem)
        client.hset(idem, "planted", "1")
    before = dump(client)
    with pytest.raises(CorruptKey):
        jobs.enqueue(QUEUE, new(idempotency_key="k", **options))
    assert without_seq(dump(client)) == without_seq(before)


@pytest.mark.parametrize("options", list(KEYED.values()), ids=list(KEYED))
@pytest.mark.parametrize("enqueued_at", ["x", "12x", "1e400", "-1", b"\xff\xfe"])
def test_a_holder_row_with_a_corrupt_enqueued_at_answers_what_the_enqueue_did(
    jobs, options, enqueued_at
):
    holder = jobs.enqueue(QUEUE, new(idempotency_key="k", **options)).id
    jobs.connector.client.hset(K.job(holder), "enqueued_at", enqueued_at)
    again = jobs.enqueue(QUEUE, new('{"n": 2}', idempotency_key="k", **options))
    assert (again.id, again.created, again.enqueued_at) == (holder, False, None)
    assert again.debounced == ("debounce_ms" in options)
    if again.debounced:
        assert row(jobs, holder)["payload"] == '{"n": 2}'
    assert_one_place(jobs)


@pytest.mark.parametrize("attempts", ["-1", "-7", str(2**53 - 1), str(2**62)])
def test_claim_dead_letters_a_row_whose_attempts_cannot_make_a_token(jobs, attempts):
    """A negative count made token 0 or less (which no worker can send back), a huge one
    a token Lua cannot hold exactly: either lease could never be ended by its holder."""
    bad, good = (e.id for e in jobs.enqueue_many(QUEUE, [new(), new()]))
    jobs.connector.client.hset(K.job(bad), "attempts", attempts)
    claim = jobs.claim(QUEUE, WORKER, count=2)
    assert [c.id for c in claim.jobs] == [good]
    dead = row(jobs, bad)
    assert dead["state"] == "dead"
    assert dead["last_error"] == "CorruptRow: attempts is negative or too large"
    assert assert_one_place(jobs) == {bad: "dead", good: "active"}


def test_a_claim_record_of_another_type_is_a_corrupt_key(jobs):
    jobs.enqueue(QUEUE, new())
    jobs.connector.client.hset(K.claim("c1"), "planted", "1")
    before = dump(jobs.connector.client)
    with pytest.raises(CorruptKey, match=r"claim:c1"):
        jobs.claim(QUEUE, WORKER, claim_id="c1")
    assert dump(jobs.connector.client) == before
