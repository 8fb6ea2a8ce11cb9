"""What every way of ending a lease owes the job, whoever ends it and whatever its row holds.

* An operator's cancel of a running job holds whichever script ends its lease: the
  holder's retry or release, a crashed child, the reaper. Before, only the reaper read
  the flag: a task that failed, or a worker that stopped, before its next renewal sent
  the job back to wait, and it ran again and completed.
* A job whose worker keeps losing its lease while the job runs in a child is not free
  for ever: after the crash budget's number of such losses it is charged, and ends dead.
* A row's errors far over their bound (written before the bound, or planted) are cut in
  one pass: the script that appends one more stays short.
* A number read from a row that Lua reads as inf, nan or 1e300 falls back to its
  default instead of becoming -2^63 (a job trimmed at once).
* A retry or crash report sent again after its reply was lost answers what it did the
  first time, as a complete does (it answered "stale": the worker logged a lost lease,
  and sent no ``task_finished`` for a job that had ended dead); a move by anyone else
  in between still leaves the caller stale.
"""

from __future__ import annotations

import json
import time

import pytest

from echomq_django.engine.bounds import DEFAULT_DEAD_TTL_MS, DEFAULT_RESULT_TTL_MS
from echomq_django.engine.error_record import error_json as error_json_of
from echomq_django.engine.errors import StaleToken
from echomq_django.engine.keyspace import QueueKeys

from .conftest import QUEUE, WORKER, assert_one_place, dump, enqueue_n, error_json, row

K = QueueKeys.of(QUEUE)


def held(jobs, **options):
    (c,) = jobs.claim(QUEUE, WORKER, count=1, **options).jobs
    return c


def server_ms(jobs) -> int:
    seconds, micros = jobs.connector.client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def cancelled_dead(jobs, job_id: str) -> None:
    r = row(jobs, job_id)
    assert r["state"] == "dead"
    assert assert_one_place(jobs)[job_id] == "dead"
    assert r["last_error"].startswith("Cancelled: ")
    classes = [e["exception_class_path"] for e in json.loads(r["errors"])]
    assert classes.count("echomq_django.engine.errors.Cancelled") == 1
    assert "cancel" not in r
    assert jobs.connector.client.hget(K.metrics, "cancelled") == "1"


# -- a cancel holds whatever ends the lease -----------------------------------------------


@pytest.mark.parametrize("options", [{}, {"backoff_ms": 60000}], ids=["at-once", "backoff"])
def test_a_cancelled_job_whose_task_failed_meanwhile_ends_dead(jobs, options):
    (job_id,) = enqueue_n(jobs, 1, max_attempts=5)
    c = held(jobs)
    assert jobs.cancel(QUEUE, job_id) == "cancelling"
    out = jobs.retry(QUEUE, job_id, c.token, error=error_json(), summary="boom", **options)
    assert out.state == "cancelled"
    cancelled_dead(jobs, job_id)
    assert "builtins.ValueError" in row(jobs, job_id)["errors"]  # the task's own error kept


def test_the_worker_stopping_a_cancelled_job_records_one_cancel(jobs):
    (job_id,) = enqueue_n(jobs, 1)
    c = held(jobs)
    jobs.cancel(QUEUE, job_id)
    stopped = error_json_of("echomq_django.engine.errors.Cancelled", "Cancelled: by an operator")
    jobs.retry(QUEUE, job_id, c.token, error=stopped, summary="Cancelled: x", give_up=True)
    cancelled_dead(jobs, job_id)


def test_a_cancelled_job_released_at_a_stop_ends_dead(jobs):
    (job_id,) = enqueue_n(jobs, 1)
    c = held(jobs)
    jobs.cancel(QUEUE, job_id)
    jobs.release(QUEUE, job_id, c.token)
    cancelled_dead(jobs, job_id)
    assert jobs.claim(QUEUE, WORKER, count=1).jobs == []


def test_a_cancelled_job_whose_child_died_ends_dead_uncharged(jobs):
    (job_id,) = enqueue_n(jobs, 1)
    c = held(jobs)
    jobs.cancel(QUEUE, job_id)
    assert jobs.crashed(QUEUE, job_id, c.token, why="killed", crash_budget=3).state == "cancelled"
    cancelled_dead(jobs, job_id)
    assert "crashes" not in row(jobs, job_id)


def test_a_cancel_that_comes_too_late_leaves_a_completed_job_clean(jobs):
    (job_id,) = enqueue_n(jobs, 1)
    c = held(jobs)
    jobs.cancel(QUEUE, job_id)
    jobs.complete(QUEUE, job_id, c.token)
    r = row(jobs, job_id)
    assert r["state"] == "completed" and "cancel" not in r


# -- a worker that keeps dying under an isolated job --------------------------------------


def test_a_job_whose_worker_keeps_dying_under_it_in_a_child_ends_dead(jobs):
    """The reviewer's loop: isolated, a 1 ms lease, reaped; before, it came back for ever."""
    (job_id,) = enqueue_n(jobs, 1, max_attempts=1)
    budget, rounds = 3, 0
    while row(jobs, job_id)["state"] != "dead":
        rounds += 1
        assert rounds <= 2 * budget, "still not dead"
        c = held(jobs, lease_ms=1, start_now=0)
        assert jobs.start_many(WORKER, [(QUEUE, job_id, c.token)], isolated=True) == [1]
        time.sleep(0.005)
        jobs.reap(QUEUE, crash_budget=budget)
    r = row(jobs, job_id)
    assert rounds == 2 * budget  # free the first `budget` times, then charged
    assert (r["crashes"], r["lost_isolated"]) == (str(budget), str(2 * budget))
    assert "in its child, 6 times" in r["errors"]
    assert jobs.retry_dead(QUEUE, [job_id]).moved == 1  # revived: a fresh budget, crashes too
    r = row(jobs, job_id)
    assert r["state"] == "pending" and "crashes" not in r and "lost_isolated" not in r


# -- rows far over their bounds -----------------------------------------------------------


def test_errors_far_over_their_bound_are_cut_in_one_short_call(jobs):
    (job_id,) = enqueue_n(jobs, 1, max_attempts=10)
    entry = json.dumps({"exception_class_path": "builtins.ValueError", "traceback": "x" * 60})
    entries = 20_000  # about 1.8 MB: the trim one entry at a time took seconds
    jobs.connector.client.hset(K.job(job_id), "errors", "[" + ",".join([entry] * entries) + "]")
    c = held(jobs)
    began = time.perf_counter()
    jobs.retry(QUEUE, job_id, c.token, error=error_json(), summary="boom")
    took = time.perf_counter() - began
    r = row(jobs, job_id)
    kept = json.loads(r["errors"])
    assert len(r["errors"]) <= 64 * 1024
    assert kept[-1]["traceback"] == "ValueError: boom"
    assert int(r["errors_dropped"]) + len(kept) == entries + 1
    assert took < 3.0, f"one retry took {took:.2f}s"  # the trim one entry at a time: ~15 s


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e300", "-5", "x"])
def test_a_ttl_that_is_no_number_in_range_falls_back_to_the_default(jobs, value):
    gone, done = enqueue_n(jobs, 2)
    for job_id in (gone, done):
        jobs.connector.client.hset(K.job(job_id), mapping={
            "dead_ttl_ms": value, "result_ttl_ms": value,
        })  # fmt: skip
    c = held(jobs)
    jobs.retry(QUEUE, gone, c.token, error=error_json(), summary="x", give_up=True)
    c = held(jobs)
    jobs.complete(QUEUE, done, c.token)
    assert jobs.trim(QUEUE, "dead").moved == 0
    assert jobs.trim(QUEUE, "completed").moved == 0
    now = server_ms(jobs)
    client = jobs.connector.client
    assert abs(client.zscore(K.dead, gone) - (now + DEFAULT_DEAD_TTL_MS)) < 60_000
    assert abs(client.zscore(K.completed, done) - (now + DEFAULT_RESULT_TTL_MS)) < 60_000


# -- an ending sent again after its reply was lost ------------------------------------------

ENDINGS = {
    "retry-pending": ("pending", lambda jobs, c: jobs.retry(
        QUEUE, c.id, c.token, error=error_json(), summary="boom", backoff_ms=0)),
    "retry-scheduled": ("scheduled", lambda jobs, c: jobs.retry(
        QUEUE, c.id, c.token, error=error_json(), summary="boom", backoff_ms=60_000)),
    "retry-dead": ("dead", lambda jobs, c: jobs.retry(
        QUEUE, c.id, c.token, error=error_json(), summary="boom", give_up=True)),
    "crashed-pending": ("pending", lambda jobs, c: jobs.crashed(
        QUEUE, c.id, c.token, why="killed", crash_budget=3)),
    "crashed-dead": ("dead", lambda jobs, c: jobs.crashed(
        QUEUE, c.id, c.token, why="killed", crash_budget=1)),
}  # fmt: skip


@pytest.mark.parametrize("cancelled", [False, True], ids=["plain", "cancelled"])
@pytest.mark.parametrize("ending", ENDINGS)
def test_an_ending_sent_again_answers_what_it_did_and_changes_nothing(jobs, ending, cancelled):
    state, end = ENDINGS[ending]
    enqueue_n(jobs, 1)
    c = held(jobs)
    if cancelled:
        jobs.cancel(QUEUE, c.id)
        state = "cancelled"
    first = end(jobs, c)
    assert first.state == state
    before = dump(jobs.connector.client)
    assert end(jobs, c) == first  # its reply was lost: the worker sends it again
    assert dump(jobs.connector.client) == before


@pytest.mark.parametrize("ending", ["retry-pending", "crashed-pending"])
def test_an_ending_sent_again_after_the_job_moved_on_is_stale(jobs, ending):
    """Claimed again (a new token), or the other ending's call: not this call's effect."""
    _, end = ENDINGS[ending]
    enqueue_n(jobs, 1)
    c = held(jobs)
    end(jobs, c)
    other = ENDINGS["crashed-pending" if ending == "retry-pending" else "retry-pending"][1]
    before = dump(jobs.connector.client)
    with pytest.raises(StaleToken):
        other(jobs, c)  # the same lease, another ending: refused
    assert dump(jobs.connector.client) == before
    held(jobs)
    before = dump(jobs.connector.client)
    with pytest.raises(StaleToken):
        end(jobs, c)
    assert dump(jobs.connector.client) == before


@pytest.mark.parametrize("ending", ["retry-pending", "crashed-pending"])
def test_a_lease_the_reaper_returned_is_stale_for_its_late_ending(jobs, ending):
    _, end = ENDINGS[ending]
    enqueue_n(jobs, 1)
    c = held(jobs, lease_ms=1)
    time.sleep(0.01)
    assert jobs.reap(QUEUE).moved == 1
    before = dump(jobs.connector.client)
    with pytest.raises(StaleToken):
        end(jobs, c)
    assert dump(jobs.connector.client) == before


def test_an_ending_sent_again_after_operator_moves_back_and_forth_is_stale(jobs):
    """A cancel and a revive bring the job back to where the retry put it, with the same
    attempts: not the retry's own effect any more."""
    enqueue_n(jobs, 1, max_attempts=5)
    c = held(jobs)
    _, retry = ENDINGS["retry-pending"]
    assert retry(jobs, c).state == "pending"
    assert jobs.cancel(QUEUE, c.id) == "dead"
    assert jobs.retry_dead(QUEUE, [c.id]).moved == 1
    before = dump(jobs.connector.client)
    with pytest.raises(StaleToken):
        retry(jobs, c)
    assert dump(jobs.connector.client) == before


def test_a_crash_sent_again_after_a_revive_and_a_cancel_is_stale(jobs):
    enqueue_n(jobs, 1, max_attempts=5)
    c = held(jobs)
    _, crashed = ENDINGS["crashed-dead"]
    assert crashed(jobs, c).state == "dead"
    assert jobs.retry_dead(QUEUE, [c.id]).moved == 1
    assert jobs.cancel(QUEUE, c.id) == "dead"
    with pytest.raises(StaleToken):
        crashed(jobs, c)


@pytest.mark.parametrize(
    "planted", ["99999999999999999999999999", "9" * 400, "1e400", "-5", "\xff"]
)
def test_a_planted_ending_answers_a_number_in_range_or_stale(jobs, planted):
    enqueue_n(jobs, 1, max_attempts=5)
    c = held(jobs)
    _, retry = ENDINGS["retry-pending"]
    retry(jobs, c)
    jobs.connector.client.hset(K.job(c.id), "ended", f"{c.token} retry pending {planted}")
    try:
        again = retry(jobs, c)
    except StaleToken:
        return
    assert again.state == "pending" and 0 <= again.due_ms <= 2**53
