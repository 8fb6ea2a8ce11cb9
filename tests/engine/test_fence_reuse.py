"""The fence never repeats a token for a job id, not even after its row is removed.

Job ids may be chosen by the caller, so an id can be enqueued again after delete or
trim. A zombie that still holds a token of the old job must then be refused by the
new one: its token can never equal (or pass) a token the new job hands out.
"""

from __future__ import annotations

import pytest

from echomq_django.engine.errors import StaleToken
from echomq_django.engine.keyspace import QueueKeys, new_job_id

from .conftest import QUEUE, WORKER, error_json, new


def _claim_one(jobs, job_id: str) -> int:
    (claimed,) = jobs.claim(QUEUE, WORKER).jobs
    assert claimed.id == job_id
    return claimed.token


def _remove_by_delete(jobs, job_id: str, token: int) -> None:
    """Its lease ran out (the holder is a zombie now): the operator deletes it."""
    jobs.connector.client.zadd(QueueKeys.of(QUEUE).active, {job_id: 1})
    assert jobs.delete(QUEUE, job_id) == "active"


def _remove_by_trim(jobs, job_id: str, token: int) -> None:
    jobs.complete(QUEUE, job_id, token)
    assert jobs.trim(QUEUE, "completed", purge=True).moved == 1


@pytest.mark.parametrize("remove", [_remove_by_delete, _remove_by_trim], ids=["delete", "trim"])
def test_a_reused_id_never_hands_out_an_old_token(jobs, remove):
    job_id = new_job_id()
    jobs.enqueue(QUEUE, new(id=job_id))
    old = _claim_one(jobs, job_id)
    remove(jobs, job_id, old)
    assert jobs.get(QUEUE, job_id) is None

    jobs.enqueue(QUEUE, new(id=job_id))
    token = _claim_one(jobs, job_id)
    assert token > old
    with pytest.raises(StaleToken):  # the zombie's late complete of the old job
        jobs.complete(QUEUE, job_id, old, '"zombie"')
    assert jobs.get(QUEUE, job_id).state == "active"
    jobs.complete(QUEUE, job_id, token, '"holder"')
    done = jobs.get(QUEUE, job_id)
    assert (done.state, done.result) == ("completed", '"holder"')


def test_a_reused_id_still_gets_its_full_attempt_budget(jobs):
    """The token starts above every removed one; what the job is charged starts at 0."""
    job_id = new_job_id()
    jobs.enqueue(QUEUE, new(id=job_id))
    for _ in range(3):  # raise the old row's token: claimed, given back, claimed...
        jobs.release(QUEUE, job_id, _claim_one(jobs, job_id))
    jobs.delete(QUEUE, job_id)

    jobs.enqueue(QUEUE, new(id=job_id, max_attempts=2))
    assert jobs.get(QUEUE, job_id).counted_attempts == 0
    first = _claim_one(jobs, job_id)
    assert jobs.get(QUEUE, job_id).counted_attempts == 1
    assert jobs.retry(QUEUE, job_id, first, error=error_json(), summary="boom").state == "pending"
    second = _claim_one(jobs, job_id)
    assert second == first + 1
    assert jobs.retry(QUEUE, job_id, second, error=error_json(), summary="boom").state == "dead"
    assert jobs.get(QUEUE, job_id).counted_attempts == 2
