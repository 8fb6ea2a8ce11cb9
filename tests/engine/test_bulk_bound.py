"""An operator's action on a whole finished set (purge, retry all dead) acts on the set as
it was when asked, while workers keep failing (or completing) jobs between its calls.

The reviewer's runs: a purge whose prompt said 1163 deleted 1619 (456 jobs that died
after the prompt, unseen); a retry of 5,000 dead jobs with workers still failing them
said "retried: 5176" (176 jobs revived twice) and, with enough failing workers, would
never end. Here the jobs die between the action's calls through the real transitions
(claim, then retry to dead), from its progress callback, so each run is the same.
"""

from __future__ import annotations

import pytest

from echomq_django.engine.errors import InvalidJobOptions
from echomq_django.engine.jobs import Bound, Jobs, Sweep
from echomq_django.engine.keyspace import QueueKeys

from .conftest import QUEUE, WORKER, assert_one_place, enqueue_n, error_json, new

K = QueueKeys.of(QUEUE)


def kill(jobs: Jobs, count: int) -> list[str]:
    """The next ``count`` pending jobs fail for good, as a worker fails them."""
    claimed = jobs.claim(QUEUE, WORKER, count=count).jobs
    for c in claimed:
        jobs.retry(QUEUE, c.id, c.token, error=error_json(), summary="x", give_up=True)
    return [c.id for c in claimed]


def complete(jobs: Jobs, count: int) -> list[str]:
    claimed = jobs.claim(QUEUE, WORKER, count=count).jobs
    for c in claimed:
        jobs.complete(QUEUE, c.id, c.token)
    return [c.id for c in claimed]


class Between:
    """A progress callback that runs ``act`` after each call, and fails the test if the
    action makes more calls than ``most`` (it would never end)."""

    def __init__(self, act, most: int = 100) -> None:
        self.act, self.most, self.calls = act, most, 0

    def __call__(self, sweep: Sweep) -> None:
        self.calls += 1
        assert self.calls <= self.most, f"still going after {self.most} calls: {sweep}"
        self.act()


def test_purge_deletes_the_dead_jobs_of_the_bound_not_those_dying_meanwhile(jobs):
    first = enqueue_n(jobs, 10, max_attempts=1)
    kill(jobs, 10)
    enqueue_n(jobs, 40, max_attempts=1)
    later: list[str] = []
    sweep = jobs.trim(
        QUEUE, "dead", purge=True, limit=3, progress=Between(lambda: later.extend(kill(jobs, 3)))
    )
    assert sweep.moved == 10, "the ten dead when asked, no more"
    assert sweep.calls == 4
    assert all(jobs.get(QUEUE, i) is None for i in first)
    assert sorted(jobs.connector.client.zrange(K.dead, 0, -1)) == sorted(later)
    assert jobs.stats(QUEUE).metrics["purged"] == 10


def test_purge_of_completed_keeps_the_jobs_completing_meanwhile(jobs):
    first = enqueue_n(jobs, 7)
    complete(jobs, 7)
    enqueue_n(jobs, 30)
    later: list[str] = []
    bound = jobs.bound(QUEUE, "completed")
    assert bound.count == 7
    complete(jobs, 5)  # between the prompt and the answer
    sweep = jobs.purge(
        QUEUE, "completed", bound=bound, limit=2,
        progress=Between(lambda: later.extend(complete(jobs, 2))),
    )  # fmt: skip
    assert sweep.moved == 7
    assert all(jobs.get(QUEUE, i) is None for i in first)
    assert jobs.stats(QUEUE).counts["completed"] == 5 + len(later)


def test_retry_all_retries_each_job_once_while_workers_fail_them_again(jobs):
    """Each call's revived jobs die again before the next call: before, every call found
    them dead again and the sweep never ended."""
    dead = enqueue_n(jobs, 10, max_attempts=1)
    kill(jobs, 10)
    sweep = jobs.retry_dead(QUEUE, limit=3, progress=Between(lambda: kill(jobs, 100)))
    # 4 calls of 3; a fifth when a job died again within the bound's last millisecond
    # (the same score as the bound's highest: read, and told apart by its end time).
    assert (sweep.moved, sweep.refused) == (10, 0) and sweep.calls in (4, 5)
    assert jobs.stats(QUEUE).metrics["revived"] == 10, "each job revived once"
    places = assert_one_place(jobs)
    assert all(places[i] == "dead" for i in dead)  # failed again, and left dead
    assert all(jobs.get(QUEUE, i).attempts == 2 for i in dead)


def test_jobs_dying_with_a_shorter_retention_sort_inside_the_bound_and_are_left(jobs):
    """A job's score in dead is its end of retention: one that dies later with a shorter
    one sorts among the old jobs, and is told apart by when it finished."""
    old = enqueue_n(jobs, 6, max_attempts=1)
    kill(jobs, 6)
    enqueue_n(jobs, 20, max_attempts=1, dead_ttl_ms=60_000)
    short: list[str] = []
    bound = jobs.bound(QUEUE, "dead")
    sweep = jobs.retry_dead(
        QUEUE, bound=bound, limit=2, progress=Between(lambda: short.extend(kill(jobs, 2)))
    )
    assert (sweep.moved, sweep.calls) == (6, 3), "the newer jobs sort before the cursor: unread"
    client = jobs.connector.client
    assert all(client.zscore(K.dead, i) < float(bound.max_score) for i in short)  # in its range
    places = assert_one_place(jobs)
    assert all(places[i] == "pending" for i in old)
    assert all(places[i] == "dead" for i in short)


def test_refused_jobs_stay_and_the_sweep_reads_past_them_once(jobs):
    keyed = [jobs.enqueue(QUEUE, new(idempotency_key=f"k{i}")).id for i in range(5)]
    kill(jobs, 5)
    plain = enqueue_n(jobs, 7)
    kill(jobs, 7)
    for i in range(5):
        jobs.enqueue(QUEUE, new(idempotency_key=f"k{i}"))  # live holders of the keys
    sweep = jobs.retry_dead(QUEUE, limit=2)
    assert (sweep.moved, sweep.refused, sweep.calls) == (7, 5, 6)
    places = assert_one_place(jobs)
    assert all(places[i] == "dead" for i in keyed) and all(places[i] == "pending" for i in plain)


@pytest.mark.parametrize("tied", [False, True], ids=["scores", "one-score"])
def test_the_next_call_starts_after_the_cursor_gone_meanwhile(jobs, tied):
    """The cursor is the last member a call read: retried (gone), or refused and then
    deleted by another operator. The next call finds the first member after it among
    those of its score, also when every member has one score (they sort by id): each
    job is read once, moved once, and each refusal counted once."""
    client = jobs.connector.client
    ids = []
    for n in range(12):  # keyed jobs (refused: their keys are held) between plain ones
        ids.append(jobs.enqueue(QUEUE, new(idempotency_key=f"k{n}" if n % 3 == 1 else None)).id)
        kill(jobs, 1)
    keyed = ids[1::3]
    for n in range(1, 12, 3):
        jobs.enqueue(QUEUE, new(idempotency_key=f"k{n}"))
    if tied:
        client.zadd(K.dead, dict.fromkeys(ids, client.zscore(K.dead, ids[0])))

    def drop_refused() -> None:
        for i in keyed:
            if jobs.get(QUEUE, i) is not None and "not retried" in (jobs.get(QUEUE, i).last_error):
                jobs.delete(QUEUE, i)

    sweep = jobs.retry_dead(QUEUE, limit=2, progress=Between(drop_refused))
    plain = [i for i in ids if i not in keyed]
    assert sweep == Sweep(moved=len(plain), calls=6, refused=len(keyed))
    assert jobs.stats(QUEUE).metrics["revived"] == len(plain)
    places = assert_one_place(jobs)
    assert all(places[i] == "pending" for i in plain)
    assert not any(i in places for i in keyed)


def test_an_empty_set_makes_no_call_and_a_bound_fits_one_set(jobs):
    bound = jobs.bound(QUEUE, "dead")
    assert (bound.count, bound.max_score) == (0, "")
    assert jobs.purge(QUEUE, "dead", bound=bound) == Sweep()
    with pytest.raises(InvalidJobOptions, match="bound of the dead set"):
        jobs.purge(QUEUE, "completed", bound=bound)
    with pytest.raises(InvalidJobOptions):
        jobs.bound(QUEUE, "pending")


def test_a_bound_reads_back_from_its_token_and_nothing_else(jobs):
    enqueue_n(jobs, 3, max_attempts=1)
    kill(jobs, 3)
    bound = jobs.bound(QUEUE, "dead")
    assert bound.count == 3 and bound.at_us > 0
    assert Bound.parse("dead", bound.token()) == bound
    for bad in ["", "3", "3:x:1", "3::1", "0:12:1", "-1:12:1", "3:inf:1", "3:12:1:2", "3:1e9:x"]:
        with pytest.raises(ValueError):
            Bound.parse("dead", bad)
