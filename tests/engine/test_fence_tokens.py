"""The fence refuses every token but the holder's, whatever its type: nothing changes.

The attempts counter is the lease's token. A token that is not an int (a float, a
Decimal, a numeric string, a bool) used to be passed through ``int()``, which truncates:
2.5 or "2" moved the job held with token 2. Every entry point that takes a token now
checks it with the one validator (``InvalidJobOptions``), before anything is sent; an
integer token that is not the holder's (stale, future, negative, huge) is refused by
the script (``StaleToken``). Either way the whole keyspace is as it was.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from echomq_django.engine.errors import InvalidJobOptions, StaleToken
from echomq_django.engine.jobs import Jobs

from .conftest import QUEUE, WORKER, dump, error_json, new

NOT_INTEGERS: dict[str, Any] = {
    "float": 2.5,
    "whole float": 2.0,
    "decimal": Decimal("2.2"),
    "numeric string": "2",
    "bool": True,
    "none": None,
}
NOT_THE_HOLDERS = {"stale": 1, "future": 3, "zero": 0, "negative": -2, "huge": 2**64 + 2}


def calls(jobs: Jobs, job_id: str, token: Any) -> dict[str, Any]:
    return {
        "complete": lambda: jobs.complete(QUEUE, job_id, token),
        "complete_many": lambda: _raise_entry(jobs.complete_many([(QUEUE, job_id, token, "null")])),
        "retry": lambda: jobs.retry(QUEUE, job_id, token, error=error_json(), summary="s"),
        "extend": lambda: jobs.extend(QUEUE, job_id, token, 5000),
        "release": lambda: jobs.release(QUEUE, job_id, token),
        "crashed": lambda: jobs.crashed(QUEUE, job_id, token, why="died"),
        "leave_many": lambda: _raise_entry(jobs.leave_many([(QUEUE, job_id, token)])),
        "start_many": lambda: _raise_entry(jobs.start_many(WORKER, [(QUEUE, job_id, token)])),
    }


def _raise_entry(entries: list[Any]) -> None:
    """A batch call answers each job's error as its entry: raise it, as the others do."""
    (entry,) = entries
    if isinstance(entry, Exception):
        raise entry


def held_with_token_two(jobs: Jobs) -> str:
    jobs.enqueue(QUEUE, new(max_attempts=5))
    (first,) = jobs.claim(QUEUE, WORKER).jobs
    jobs.release(QUEUE, first.id, first.token)
    (held,) = jobs.claim(QUEUE, WORKER).jobs
    assert held.token == 2
    return held.id


OPERATIONS = list(calls(None, "", 0))  # type: ignore[arg-type]


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("token", list(NOT_INTEGERS.values()), ids=list(NOT_INTEGERS))
def test_a_token_that_is_no_integer_is_refused_before_anything_is_sent(jobs, operation, token):
    job_id = held_with_token_two(jobs)
    before = dump(jobs.connector.client)
    with pytest.raises(InvalidJobOptions, match="token"):
        calls(jobs, job_id, token)[operation]()
    assert dump(jobs.connector.client) == before


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("token", list(NOT_THE_HOLDERS.values()), ids=list(NOT_THE_HOLDERS))
def test_an_integer_token_not_the_holders_changes_nothing(jobs, operation, token):
    job_id = held_with_token_two(jobs)
    before = dump(jobs.connector.client)
    with pytest.raises((StaleToken, InvalidJobOptions)):
        calls(jobs, job_id, token)[operation]()
    assert dump(jobs.connector.client) == before
