"""Each transition's behaviour, on Valkey 8 and Redis 7 (the ``server`` fixture)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from echomq_django.engine.errors import (
    CancelRequested,
    JobExists,
    JobNotFound,
    StaleToken,
    WrongState,
)
from echomq_django.engine.jobs import DEFAULT_LEASE_MS, NewJob
from echomq_django.engine.keyspace import QueueKeys, new_job_id, validate_job_id
from echomq_django.engine.new_job import idempotency_digest

from .conftest import (
    QUEUE,
    WORKER,
    assert_one_place,
    dump,
    enqueue_n,
    error_json,
    members,
    new,
    row,
)


def server_ms(jobs) -> int:
    seconds, micros = jobs.connector.client.time()
    return seconds * 1000 + micros // 1000


def claim_one(jobs, lease_ms: int = DEFAULT_LEASE_MS, worker: str = WORKER):
    claimed = jobs.claim(QUEUE, worker, lease_ms=lease_ms).jobs
    assert len(claimed) == 1
    return claimed[0]


def expire(jobs, lease_ms: int = 1, worker: str = WORKER):
    """Claim the next job with a lease that is over before we return."""
    c = claim_one(jobs, lease_ms=lease_ms, worker=worker)
    time.sleep(lease_ms / 1000 + 0.005)
    return c


# -- enqueue ------------------------------------------------------------------------------


def test_enqueue_writes_a_pending_row_on_the_server_clock(jobs):
    before = server_ms(jobs)
    e = jobs.enqueue(QUEUE, new('{"x": 1}', priority=5, max_attempts=4, lease_ms=700))
    after = server_ms(jobs)
    assert (e.state, e.created) == ("pending", True)
    job = jobs.get(QUEUE, e.id)
    assert (job.state, job.payload, job.task) == ("pending", '{"x": 1}', "tests.task")
    assert (job.priority, job.max_attempts, job.lease_ms, job.attempts) == (5, 4, 700, 0)
    assert before * 1000 <= job.enqueued_at <= (after + 1) * 1000
    assert members(jobs)["pending"] == [e.id]
    assert jobs.stats(QUEUE).metrics["enqueued"] == 1
    assert jobs.queues() == [QUEUE]


def test_enqueue_many_keeps_order_and_validates_everything_first(jobs):
    ids = enqueue_n(jobs, 5)
    assert members(jobs)["pending"] == ids
    assert [c.id for c in jobs.claim(QUEUE, WORKER, count=5).jobs] == ids


def test_job_ids_made_one_after_another_sort_in_that_order():
    """Thousands of ids within a few milliseconds: equal times in a listing break ties
    by id, so the ids themselves must keep the order (a CLI test saw three jobs
    completed in one millisecond listed out of order)."""
    ids = [new_job_id() for _ in range(20_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(validate_job_id(i) == i for i in ids[::997])
    assert {i[:13] for i in ids} != {ids[0][:13]}  # it spanned several milliseconds


FORKED_IDS = """
import os
from echomq_django.engine.keyspace import new_job_id
new_job_id()  # the pool is drawn
read, write = os.pipe()
if os.fork() == 0:  # the child: its next ids, to the parent
    os.write(write, " ".join(new_job_id() for _ in range(50)).encode())
    os._exit(0)
os.close(write)
mine = {new_job_id() for _ in range(50)}
os.wait()
theirs = set(os.fdopen(read).read().split())
assert len(theirs) == 50 and not mine & theirs
assert {i[24:] for i in mine}.isdisjoint(i[24:] for i in theirs)  # the random tails too
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_never_makes_the_ids_its_parent_makes():
    """The random bits are drawn in pools: a child that kept its parent's pool (and
    counter) would make the parent's next ids, one for one, in the same millisecond.
    (In an interpreter of its own: this one runs threads, and forking it is unsafe.)"""
    subprocess.run([sys.executable, "-c", FORKED_IDS], check=True, timeout=60)


def test_enqueue_of_an_existing_id_raises_and_changes_nothing(jobs):
    e = jobs.enqueue(QUEUE, new('{"first": 1}'))
    before = row(jobs, e.id)
    with pytest.raises(JobExists):
        jobs.enqueue(QUEUE, new('{"second": 1}', id=e.id))
    assert row(jobs, e.id) == before


def test_enqueue_with_a_future_due_time_is_scheduled(jobs):
    due = server_ms(jobs) + 60_000
    e = jobs.enqueue(QUEUE, new(due_ms=due, run_after="2030-01-01T00:00:00+00:00"))
    assert e.state == "scheduled"
    job = jobs.get(QUEUE, e.id)
    assert (job.due_ms, job.run_after) == (due, "2030-01-01T00:00:00+00:00")
    assert jobs.connector.client.zscore(QueueKeys.of(QUEUE).scheduled, e.id) == due
    assert jobs.enqueue(QUEUE, new(due_ms=server_ms(jobs) - 1)).state == "pending"


def test_idempotency_key_is_held_while_live_and_released_when_finished(jobs):
    first = jobs.enqueue(QUEUE, new(idempotency_key="order-7"))
    again = jobs.enqueue(QUEUE, new(idempotency_key="order-7"))
    assert (again.id, again.state, again.created) == (first.id, "pending", False)
    other_task = jobs.enqueue(
        QUEUE, NewJob(payload="{}", task="tests.other", idempotency_key="order-7")
    )
    assert other_task.created  # a key is held per task: another task's job is its own
    digest = idempotency_digest("tests.task", "order-7")
    assert jobs.get(QUEUE, first.id).idempotency_key == digest  # a digest, not a key name
    c = claim_one(jobs)
    assert jobs.enqueue(QUEUE, new(idempotency_key="order-7")).id == first.id  # active
    jobs.complete(QUEUE, c.id, c.token)
    after_complete = jobs.enqueue(QUEUE, new(idempotency_key="order-7"))
    assert after_complete.created and after_complete.id != first.id

    scheduled = jobs.enqueue(QUEUE, new(idempotency_key="k2", due_ms=server_ms(jobs) + 60_000))
    assert jobs.enqueue(QUEUE, new(idempotency_key="k2")).id == scheduled.id
    jobs.cancel(QUEUE, scheduled.id)  # -> dead: the key is free again
    assert jobs.enqueue(QUEUE, new(idempotency_key="k2")).created
    assert len(assert_one_place(jobs)) == 5  # no duplicate was written (one is tests.other's)


def test_a_revived_dead_job_holds_its_idempotency_key_again_unless_taken(jobs):
    """The key is held while the job is live: pending again after retry_dead is live."""
    revived = jobs.enqueue(QUEUE, new(idempotency_key="k")).id
    c = claim_one(jobs)
    jobs.retry(QUEUE, c.id, c.token, error=error_json(), summary="x", give_up=True)
    jobs.retry_dead(QUEUE, [revived])
    again = jobs.enqueue(QUEUE, new(idempotency_key="k"))
    assert (again.id, again.created) == (revived, False)

    c = claim_one(jobs)  # dead again; this time another job takes the key meanwhile
    jobs.retry(QUEUE, c.id, c.token, error=error_json(), summary="x", give_up=True)
    newer = jobs.enqueue(QUEUE, new(idempotency_key="k")).id
    assert jobs.retry_dead(QUEUE, [revived]).moved == 0  # refused: one key, one live job
    assert jobs.enqueue(QUEUE, new(idempotency_key="k")).id == newer  # never stolen
    assert assert_one_place(jobs) == {revived: "dead", newer: "pending"}
    assert jobs.get(QUEUE, revived).last_error.endswith(f"held by live job {newer}")


# -- claim --------------------------------------------------------------------------------


def test_claim_takes_highest_priority_first_then_fifo(jobs):
    low = jobs.enqueue(QUEUE, new(priority=-5)).id
    a = jobs.enqueue(QUEUE, new(priority=10)).id
    mid = jobs.enqueue(QUEUE, new()).id
    b = jobs.enqueue(QUEUE, new(priority=10)).id
    top = jobs.enqueue(QUEUE, new(priority=100)).id
    bottom = jobs.enqueue(QUEUE, new(priority=-100)).id
    got = [c.id for c in jobs.claim(QUEUE, WORKER, count=10).jobs]
    assert got == [top, a, b, mid, low, bottom]


def test_claim_mints_the_token_and_stamps_the_lease(jobs):
    e = jobs.enqueue(QUEUE, new())
    claim = jobs.claim(QUEUE, WORKER, lease_ms=5000)
    (c,) = claim.jobs
    assert (c.id, c.token, c.job.state, c.job.worker) == (e.id, 1, "active", WORKER)
    assert c.job.lease_deadline == claim.now_ms + 5000
    assert jobs.connector.client.zscore(QueueKeys.of(QUEUE).active, e.id) == claim.now_ms + 5000
    assert c.job.started_at == c.job.last_attempted_at
    assert jobs.stats(QUEUE).metrics["claimed"] == 1


def test_claim_uses_the_jobs_own_lease_when_it_has_one(jobs):
    jobs.enqueue(QUEUE, new(lease_ms=1234))
    claim = jobs.claim(QUEUE, WORKER, lease_ms=60_000)
    assert claim.jobs[0].job.lease_deadline == claim.now_ms + 1234


def test_claim_batch_count_and_empty_queue(jobs):
    enqueue_n(jobs, 7)
    assert len(jobs.claim(QUEUE, WORKER, count=3).jobs) == 3
    assert len(jobs.claim(QUEUE, WORKER, count=10).jobs) == 4
    empty = jobs.claim(QUEUE, WORKER, count=10)
    assert (empty.jobs, empty.next_due_ms) == ([], None)
    assert abs(empty.now_ms - server_ms(jobs)) < 1000


def test_claim_promotes_due_jobs_and_reports_the_next_due_time(jobs):
    now = server_ms(jobs)
    due_soon = jobs.enqueue(QUEUE, new(due_ms=now + 30)).id
    later = jobs.enqueue(QUEUE, new(due_ms=now + 60_000)).id
    first = jobs.claim(QUEUE, WORKER)
    assert first.jobs == [] and first.next_due_ms == now + 30
    time.sleep(0.05)
    second = jobs.claim(QUEUE, WORKER)
    assert [c.id for c in second.jobs] == [due_soon]
    assert second.next_due_ms == now + 60_000
    assert members(jobs)["scheduled"] == [later]


def test_worker_ids_and_start_times_record_the_runs_not_the_claims(jobs):
    job_id = jobs.enqueue(QUEUE, new(max_attempts=5)).id
    jobs.claim(QUEUE, "w-idle", lease_ms=1)  # leased, never started: not a run
    time.sleep(0.005)
    jobs.reap(QUEUE)
    first = jobs.claim(QUEUE, "w-a", lease_ms=1, start_now=1).jobs[0]
    assert (first.job.worker_ids, first.job.started, first.job.started_at) == (("w-a",), True, None)
    jobs.extend(QUEUE, job_id, first.token, 1, ran_us=2_000)  # stamped: began 2 ms ago
    started_at = jobs.get(QUEUE, job_id).started_at
    time.sleep(0.005)
    jobs.reap(QUEUE)
    second = claim_one(jobs, worker="w-b")  # it was running: it comes back solo, unstarted
    assert (second.token, second.job.solo, second.job.started) == (first.token + 1, True, False)
    assert jobs.start_many("w-b", [(QUEUE, job_id, second.token)]) == [1]
    jobs.complete(QUEUE, job_id, second.token, ran_us=1_000)
    job = jobs.get(QUEUE, job_id)
    assert job.worker_ids == ("w-a", "w-b")
    assert job.started_at == started_at < job.last_attempted_at < job.finished_at
    assert job.finished_at - job.last_attempted_at >= 1_000


@pytest.mark.parametrize("outcome", ["complete", "retry", "extend"])
def test_a_run_is_stamped_once_when_a_heartbeat_and_its_outcome_cross(jobs, outcome):
    """The heartbeat's stamp can be in flight when the outcome sends its own (each
    measured with its own latency): the first holds, so one attempt keeps
    started_at == last_attempted_at, as Django's contract reads them."""
    job_id = jobs.enqueue(QUEUE, new(max_attempts=5)).id
    c = jobs.claim(QUEUE, WORKER, lease_ms=60_000, start_now=1).jobs[0]
    jobs.extend(QUEUE, job_id, c.token, 60_000, ran_us=5_000)
    stamped = jobs.get(QUEUE, job_id).last_attempted_at
    if outcome == "complete":
        jobs.complete(QUEUE, job_id, c.token, ran_us=1_000)
    elif outcome == "retry":
        jobs.retry(QUEUE, job_id, c.token, error='{"traceback": "x"}', summary="x", ran_us=1_000)
    else:
        jobs.extend(QUEUE, job_id, c.token, 60_000, ran_us=1_000)
    job = jobs.get(QUEUE, job_id)
    assert job.started_at == job.last_attempted_at == stamped
    # the next run is stamped afresh
    if outcome == "retry":
        again = claim_one(jobs)
        jobs.complete(QUEUE, job_id, again.token, ran_us=0)
        job = jobs.get(QUEUE, job_id)
        assert job.started_at == stamped < job.last_attempted_at


# -- complete -----------------------------------------------------------------------------


def test_complete_stores_the_result_and_keeps_the_row_for_its_ttl(jobs):
    jobs.enqueue(QUEUE, new(result_ttl_ms=60_000))
    c = claim_one(jobs)
    finished_us = jobs.complete(QUEUE, c.id, c.token, '{"ok": true}')
    job = jobs.get(QUEUE, c.id)
    assert (job.state, job.result, job.finished_at, job.worker) == (
        "completed",
        '{"ok": true}',
        finished_us,
        "",
    )
    score = jobs.connector.client.zscore(QueueKeys.of(QUEUE).completed, c.id)
    assert score == finished_us // 1000 + 60_000
    assert members(jobs)["active"] == []
    stats = jobs.stats(QUEUE)
    assert stats.metrics["completed"] == 1 and stats.counts["completed"] == 1


def test_complete_again_answers_the_same_and_another_token_is_stale(jobs):
    jobs.enqueue(QUEUE, new())
    c = claim_one(jobs)
    finished = jobs.complete(QUEUE, c.id, c.token, '"first"')
    before = dump(jobs.connector.client)
    assert jobs.complete(QUEUE, c.id, c.token, '"again"') == finished  # a lost reply, re-sent
    assert dump(jobs.connector.client) == before
    with pytest.raises(StaleToken, match="completed, not active"):
        jobs.complete(QUEUE, c.id, c.token + 1)


def test_complete_many_returns_errors_as_values(jobs):
    enqueue_n(jobs, 3)
    cs = jobs.claim(QUEUE, WORKER, count=3).jobs
    replies = jobs.complete_many(
        [
            (QUEUE, cs[0].id, cs[0].token, "1"),
            (QUEUE, cs[1].id, 99, "2"),
            (QUEUE, cs[2].id, cs[2].token, "3"),
        ]
    )
    assert isinstance(replies[1], StaleToken)
    assert [jobs.get(QUEUE, c.id).state for c in cs] == ["completed", "active", "completed"]


# -- retry --------------------------------------------------------------------------------


def test_retry_with_backoff_schedules_and_appends_the_error(jobs):
    jobs.enqueue(QUEUE, new(max_attempts=3))
    c = claim_one(jobs)
    outcome = jobs.retry(
        QUEUE, c.id, c.token, error=error_json("E1"), summary="ValueError: E1", backoff_ms=40
    )
    job = jobs.get(QUEUE, c.id)
    assert outcome.state == "scheduled" and job.state == "scheduled"
    assert job.due_ms == outcome.due_ms
    assert job.last_error == "ValueError: E1"
    assert [e["traceback"] for e in job.error_list] == ["E1"]
    time.sleep(0.06)
    c2 = claim_one(jobs)
    assert (c2.id, c2.token) == (c.id, 2)
    jobs.retry(QUEUE, c2.id, c2.token, error=error_json("E2"), summary="ValueError: E2")
    assert [e["traceback"] for e in jobs.get(QUEUE, c.id).error_list] == ["E1", "E2"]
    assert jobs.stats(QUEUE).metrics["retried"] == 2


def test_retry_without_backoff_goes_to_the_back_of_pending(jobs):
    first, second = enqueue_n(jobs, 2)
    c = claim_one(jobs)
    assert jobs.retry(QUEUE, c.id, c.token, error=error_json(), summary="x").state == "pending"
    assert members(jobs)["pending"] == [second, first]


def test_retry_past_max_attempts_goes_dead(jobs):
    jobs.enqueue(QUEUE, new(max_attempts=2))
    for expected in ("pending", "dead"):
        c = claim_one(jobs)
        assert jobs.retry(QUEUE, c.id, c.token, error=error_json(), summary="x").state == expected
    job = jobs.get(QUEUE, c.id)
    assert (job.state, job.attempts, len(job.error_list)) == ("dead", 2, 2)
    assert job.finished_at is not None
    assert members(jobs)["dead"] == [c.id]
    assert jobs.stats(QUEUE).metrics["dead"] == 1


def test_retry_give_up_goes_dead_at_once(jobs):
    jobs.enqueue(QUEUE, new(max_attempts=10))
    c = claim_one(jobs)
    out = jobs.retry(QUEUE, c.id, c.token, error=error_json(), summary="x", give_up=True)
    assert out.state == "dead"
    assert assert_one_place(jobs) == {c.id: "dead"}


# -- extend -------------------------------------------------------------------------------


def test_extend_moves_the_deadline_on_the_server_clock(jobs):
    jobs.enqueue(QUEUE, new())
    c = claim_one(jobs, lease_ms=1000)
    deadline = jobs.extend(QUEUE, c.id, c.token, 90_000)
    now = server_ms(jobs)
    assert now + 90_000 - 1000 < deadline <= now + 90_000
    assert jobs.get(QUEUE, c.id).lease_deadline == deadline
    assert jobs.connector.client.zscore(QueueKeys.of(QUEUE).active, c.id) == deadline
    assert (
        jobs.extend_many([(QUEUE, c.id, c.token, 1000), (QUEUE, c.id, 7, 1000)])[1].__class__
        is StaleToken
    )


def test_an_extended_lease_is_not_reaped(jobs):
    jobs.enqueue(QUEUE, new())
    c = claim_one(jobs, lease_ms=30)
    jobs.extend(QUEUE, c.id, c.token, 60_000)
    time.sleep(0.05)
    assert jobs.reap(QUEUE).moved == 0
    assert jobs.get(QUEUE, c.id).state == "active"


# -- release ------------------------------------------------------------------------------


def test_release_refunds_the_attempt_and_keeps_the_place(jobs):
    first, second = enqueue_n(jobs, 2, max_attempts=1)
    c = claim_one(jobs)
    assert c.id == first
    for _ in range(3):  # max_attempts=1, yet released attempts never exhaust it
        jobs.release(QUEUE, c.id, c.token)
        assert members(jobs)["pending"] == [first, second]
        c = claim_one(jobs)
    job = jobs.get(QUEUE, first)
    assert (job.attempts, job.refunds, c.token) == (4, 3, 4)  # the token never went down
    assert jobs.retry(QUEUE, c.id, c.token, error=error_json(), summary="x").state == "dead"
    assert jobs.stats(QUEUE).metrics["released"] == 3


def test_a_release_of_a_run_that_never_began_takes_back_the_run_its_claim_recorded(jobs):
    """A claim marks every job it leases as started (read-ahead included); one given back
    unrun must not count as a run (Django's attempts are the row's worker_ids)."""
    [job_id] = enqueue_n(jobs, 1)
    ran = jobs.claim(QUEUE, "w1", start_now=1).jobs[0]
    jobs.release(QUEUE, job_id, ran.token)  # began (the default): the run stays on record
    assert jobs.get(QUEUE, job_id).worker_ids == ("w1",)
    waited = jobs.claim(QUEUE, "w2", start_now=1).jobs[0]
    assert jobs.get(QUEUE, job_id).worker_ids == ("w1", "w2")
    jobs.release(QUEUE, job_id, waited.token, began=False)
    row = jobs.get(QUEUE, job_id)
    assert (row.worker_ids, row.state) == (("w1",), "pending")
    third = jobs.claim(QUEUE, "w3", start_now=1).jobs[0]
    assert jobs.get(QUEUE, job_id).worker_ids == ("w1", "w3")
    with pytest.raises(StaleToken):  # the fence still holds for the unrun lease
        jobs.release(QUEUE, job_id, waited.token, began=False)
    assert jobs.get(QUEUE, job_id).worker_ids == ("w1", "w3")
    assert third.token > waited.token


# -- reap ---------------------------------------------------------------------------------


def test_reap_charges_a_job_only_for_a_crash_it_ran_alone(jobs):
    """Per-job accounting: unstarted -> back free; started beside others -> back free and
    solo; started solo -> a WorkerCrashed charged, dead at the crash budget."""
    job_id = jobs.enqueue(QUEUE, new(max_attempts=1)).id
    for _ in range(3):  # read-ahead that never started costs nothing, however often
        expire(jobs)
        assert (jobs.reap(QUEUE, crash_budget=2).moved, jobs.get(QUEUE, job_id).solo) == (1, False)
    job = jobs.get(QUEUE, job_id)
    assert (job.state, job.counted_attempts, job.error_list, job.worker_ids) == (
        "pending",
        0,
        [],
        (),
    )
    jobs.claim(QUEUE, WORKER, lease_ms=1, start_now=1)  # it ran, beside others maybe
    time.sleep(0.005)
    assert jobs.reap(QUEUE, crash_budget=2).moved == 1
    job = jobs.get(QUEUE, job_id)
    assert (job.state, job.solo, job.crashes, job.counted_attempts) == ("pending", True, 0, 0)
    for crash in (1, 2):
        c = expire(jobs)
        assert jobs.start_many(WORKER, [(QUEUE, job_id, c.token)]) == [1]
        time.sleep(0.005)
        sweep = jobs.reap(QUEUE, crash_budget=2)
        assert (sweep.moved, sweep.dead) == ((1, 0) if crash == 1 else (0, 1))
    job = jobs.get(QUEUE, job_id)
    assert (job.state, job.crashes, job.counted_attempts) == ("dead", 2, 0)
    assert [e["exception_class_path"] for e in job.error_list] == [
        "echomq_django.engine.errors.WorkerCrashed"
    ] * 2
    assert WORKER in job.error_list[0]["traceback"] and job.last_error.startswith("WorkerCrashed")
    metrics = jobs.stats(QUEUE).metrics
    assert (metrics["reaped"], metrics["reaped_unstarted"], metrics["reaped_dead"]) == (5, 3, 1)


def test_reap_leaves_live_leases_alone(jobs):
    enqueue_n(jobs, 2)
    live = claim_one(jobs, lease_ms=60_000)
    gone = expire(jobs)
    assert jobs.reap(QUEUE).moved == 1
    assert jobs.get(QUEUE, live.id).state == "active"
    assert jobs.get(QUEUE, gone.id).state == "pending"


def test_reap_is_bounded_per_call_and_loops_while_more(jobs):
    enqueue_n(jobs, 7)
    jobs.claim(QUEUE, WORKER, count=7, lease_ms=1)
    time.sleep(0.01)
    sweep = jobs.reap(QUEUE, limit=3)
    assert (sweep.moved, sweep.calls) == (7, 3)
    assert len(members(jobs)["pending"]) == 7


# -- promote / run_now / cancel -----------------------------------------------------------


def test_promote_moves_only_due_jobs_in_bounded_calls(jobs):
    now = server_ms(jobs)
    due = enqueue_n(jobs, 5, due_ms=now + 1000)  # a margin a loaded machine holds
    later = jobs.enqueue(QUEUE, new(due_ms=now + 60_000)).id
    assert jobs.promote(QUEUE).moved == 0
    deadline = time.monotonic() + 30
    while server_ms(jobs) <= now + 1000:  # await the server's clock, not a fixed sleep
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sweep = jobs.promote(QUEUE, limit=2)
    assert (sweep.moved, sweep.calls) == (5, 3)
    assert sorted(members(jobs)["pending"]) == sorted(due)
    assert members(jobs)["scheduled"] == [later]
    assert {jobs.get(QUEUE, i).due_ms for i in due} == {None}


def test_run_now_moves_a_scheduled_job_to_pending(jobs):
    e = jobs.enqueue(QUEUE, new(due_ms=server_ms(jobs) + 60_000))
    jobs.run_now(QUEUE, e.id)
    assert assert_one_place(jobs) == {e.id: "pending"}
    with pytest.raises(WrongState):
        jobs.run_now(QUEUE, e.id)
    with pytest.raises(JobNotFound):
        jobs.run_now(QUEUE, "01890a5d-ac96-774b-bcce-b302099a8057")


def test_cancel_sends_waiting_jobs_to_dead_and_flags_running_ones(jobs):
    p = jobs.enqueue(QUEUE, new()).id
    s = jobs.enqueue(QUEUE, new(due_ms=server_ms(jobs) + 60_000)).id
    jobs.cancel(QUEUE, p)
    jobs.cancel(QUEUE, s, "no longer needed")
    job = jobs.get(QUEUE, s)
    assert job.error_list[0]["exception_class_path"] == "echomq_django.engine.errors.Cancelled"
    assert job.last_error == "Cancelled: no longer needed"
    assert assert_one_place(jobs) == {p: "dead", s: "dead"}
    assert jobs.stats(QUEUE).metrics["cancelled"] == 2
    a = jobs.enqueue(QUEUE, new()).id
    c = claim_one(jobs)
    assert jobs.cancel(QUEUE, a, "stop it") == "cancelling"  # its worker stops it
    assert jobs.get(QUEUE, a).state == "active"
    with pytest.raises(CancelRequested, match="stop it"):  # its next renewal says so
        jobs.extend(QUEUE, a, c.token, 1000)
    with pytest.raises(WrongState):  # a finished job cannot be cancelled
        jobs.cancel(QUEUE, p)


# -- retry_dead / delete / trim -------------------------------------------------------------


def test_retry_dead_gives_a_fresh_budget_and_never_lowers_the_token(jobs):
    jobs.enqueue(QUEUE, new(max_attempts=2))
    for _ in range(2):
        c = claim_one(jobs)
        jobs.retry(QUEUE, c.id, c.token, error=error_json(), summary="x")
    assert jobs.get(QUEUE, c.id).state == "dead"
    assert jobs.retry_dead(QUEUE, [c.id]).moved == 1
    job = jobs.get(QUEUE, c.id)
    assert (job.state, job.attempts, job.finished_at) == ("pending", 2, None)
    c3 = claim_one(jobs)
    assert c3.token == 3  # up, never down
    assert jobs.retry(QUEUE, c3.id, c3.token, error=error_json(), summary="x").state == "pending"
    c4 = claim_one(jobs)
    assert jobs.retry(QUEUE, c4.id, c4.token, error=error_json(), summary="x").state == "dead"
    assert jobs.stats(QUEUE).metrics["revived"] == 1


def test_retry_dead_of_many_ids_is_bounded_per_call(jobs):
    ids = enqueue_n(jobs, 5)
    for job_id in ids:
        jobs.cancel(QUEUE, job_id)
    seen = []
    sweep = jobs.retry_dead(QUEUE, ids, limit=2, progress=seen.append)
    assert (sweep.moved, sweep.calls) == (5, 3)
    assert [s.moved for s in seen] == [2, 4, 5]
    assert set(assert_one_place(jobs).values()) == {"pending"}


def test_retry_dead_without_ids_sweeps_all_and_skips_live_ids(jobs):
    ids = enqueue_n(jobs, 5)
    for job_id in ids:
        jobs.cancel(QUEUE, job_id)
    live = jobs.enqueue(QUEUE, new()).id
    assert jobs.retry_dead(QUEUE, [live]).moved == 0
    sweep = jobs.retry_dead(QUEUE, limit=2)
    assert (sweep.moved, sweep.calls) == (5, 3)
    assert set(assert_one_place(jobs).values()) == {"pending"}


@pytest.mark.parametrize("state", ["pending", "scheduled", "active", "completed", "dead"])
def test_delete_removes_the_job_from_any_place(jobs, state):
    e = jobs.enqueue(
        QUEUE,
        new(idempotency_key="k", due_ms=server_ms(jobs) + 60_000 if state == "scheduled" else 0),
    )
    if state in ("active", "completed"):
        c = claim_one(jobs, lease_ms=1)
        time.sleep(0.01)  # an active job is deleted once its lease ran out, never running
        if state == "completed":
            jobs.complete(QUEUE, c.id, c.token)
    if state == "dead":
        jobs.cancel(QUEUE, e.id)
    assert jobs.delete(QUEUE, e.id) == state
    assert jobs.get(QUEUE, e.id) is None
    assert assert_one_place(jobs) == {}
    assert jobs.enqueue(QUEUE, new(idempotency_key="k")).created
    with pytest.raises(JobNotFound):
        jobs.delete(QUEUE, e.id)


def test_a_running_job_is_not_deleted(jobs):
    """Deleting it could not stop its task, and its concurrency slot would go with the
    row while the task still ran: refused, nothing changed, until it ends or its lease
    runs out."""
    e = jobs.enqueue(QUEUE, new(idempotency_key="k", limits="conc:t/1"))
    claim_one(jobs)
    before = {k: jobs.connector.client.dump(k) for k in jobs.connector.client.scan_iter("*")}
    with pytest.raises(WrongState, match="is running: cancel it first"):
        jobs.delete(QUEUE, e.id)
    after = {k: jobs.connector.client.dump(k) for k in jobs.connector.client.scan_iter("*")}
    assert after == before


def test_trim_drops_rows_past_retention_and_purge_drops_all(jobs):
    enqueue_n(jobs, 3, result_ttl_ms=0)
    enqueue_n(jobs, 2, result_ttl_ms=60_000)
    for c in jobs.claim(QUEUE, WORKER, count=5).jobs:
        jobs.complete(QUEUE, c.id, c.token)
    time.sleep(0.002)
    assert jobs.trim(QUEUE, "completed").moved == 3
    assert len(assert_one_place(jobs)) == 2
    sweep = jobs.trim(QUEUE, "completed", purge=True, limit=1)
    assert (sweep.moved, sweep.calls) == (2, 2)
    assert assert_one_place(jobs) == {}
    metrics = jobs.stats(QUEUE).metrics
    assert (metrics["trimmed"], metrics["purged"]) == (3, 2)
    with pytest.raises(ValueError):
        jobs.trim(QUEUE, "pending")


def test_trim_of_dead_respects_dead_ttl(jobs):
    short = jobs.enqueue(QUEUE, new(dead_ttl_ms=0)).id
    kept = jobs.enqueue(QUEUE, new()).id
    jobs.cancel(QUEUE, short)
    jobs.cancel(QUEUE, kept)
    time.sleep(0.002)
    assert jobs.trim(QUEUE, "dead").moved == 1
    assert assert_one_place(jobs) == {kept: "dead"}


# -- reads --------------------------------------------------------------------------------


def test_stats_counts_each_place(jobs):
    enqueue_n(jobs, 4)
    jobs.enqueue(QUEUE, new(due_ms=server_ms(jobs) + 60_000))
    a, b, _still_active = jobs.claim(QUEUE, WORKER, count=3).jobs
    jobs.complete(QUEUE, a.id, a.token)
    jobs.retry(QUEUE, b.id, b.token, error=error_json(), summary="x", give_up=True)
    stats = jobs.stats(QUEUE)
    assert stats.counts == {"pending": 1, "scheduled": 1, "active": 1, "completed": 1, "dead": 1}
    assert abs(stats.now_ms - server_ms(jobs)) < 1000


def test_page_offsets_and_newest_first(jobs):
    ids = enqueue_n(jobs, 7)
    page = jobs.page(QUEUE, "pending", offset=2, count=3)
    assert page.total == 7
    assert [e.id for e in page.entries] == ids[2:5]
    assert page.entries[0].fields["task"] == "tests.task"
    assert page.entries[0].fields["attempts"] == "0"
    newest = jobs.page(QUEUE, "pending", count=2, newest_first=True, fields=("payload",))
    assert [e.id for e in newest.entries] == ids[::-1][:2]
    assert newest.entries[0].fields == {"payload": '{"n": 6}'}
    assert jobs.page(QUEUE, "pending", offset=50).entries == []
    assert jobs.page(QUEUE, "dead").total == 0


def test_throughput_counts_completed_and_failed_per_minute(jobs):
    enqueue_n(jobs, 3, max_attempts=1)
    a, b, c = jobs.claim(QUEUE, WORKER, count=3).jobs
    jobs.complete(QUEUE, a.id, a.token)
    jobs.complete(QUEUE, b.id, b.token)
    jobs.retry(QUEUE, c.id, c.token, error=error_json(), summary="x")
    series = jobs.throughput(QUEUE, minutes=2)
    assert len(series) == 2 and series[1][0] - series[0][0] == 1
    assert server_ms(jobs) // 60_000 - series[1][0] in (0, 1)
    assert sum(s[1] for s in series) == 2 and sum(s[2] for s in series) == 1
    key = QueueKeys.of(QUEUE).throughput(series[1][0])
    if jobs.connector.client.exists(key):
        assert 0 < jobs.connector.client.ttl(key) <= 7200


def test_error_list_holds_json_objects_exactly(jobs):
    jobs.enqueue(QUEUE, new(max_attempts=3))
    big = {"exception_class_path": "x.Y", "traceback": 'line\n"quoted" \\ ünï', "n": 2**60 + 1}
    c = claim_one(jobs)
    jobs.retry(QUEUE, c.id, c.token, error=json.dumps(big), summary="x")
    [kept] = jobs.get(QUEUE, c.id).error_list
    stamps = {"at_us": kept.pop("at_us"), "worker": kept.pop("worker")}
    assert kept == big  # no rounding, no re-encoding by Lua
    # Stamped when and on whose lease it was recorded (the server's clock).
    assert (
        stamps["worker"] == WORKER and 0 <= server_ms(jobs) * 1000 + 1000 - stamps["at_us"] < 60e6
    )
