"""A place of another type refuses the script before its first write: no job in no place.

A job lives in one sorted set (pending, scheduled, active, completed, dead), a schedule
in the queue's schedules set. A key of another type planted at one of them (an operator's
typo, another app sharing the keyspace) used to fail a script at its move, after its
first writes: a claim popped its batch from pending and failed at active, leaving every
job of it in no place, and the worker's retry popped the next batch. Every script now
checks the places its header names before anything else (script.py's guard) and answers
``CorruptKey``; nothing changes, and once the key is repaired the queue goes on.

Each case below runs one transition over each place its script's header names, planted
as a hash, and checks that the whole keyspace is as it was. The last test checks that
every script that names a place has a case here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from echomq_django.engine import script
from echomq_django.engine.errors import CorruptKey
from echomq_django.engine.jobs import Jobs
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.scheduler import Scheduler
from echomq_django.engine.worker import Success, Worker
from tests.schedules.conftest import backdate, every

from .conftest import QUEUE, WORKER, assert_one_place, enqueue_n, error_json, new

K = QueueKeys.of(QUEUE)


def server_ms(client) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def claim(jobs: Jobs, count: int = 1, **options: Any):
    claimed = jobs.claim(QUEUE, WORKER, count=count, **options).jobs
    assert len(claimed) == count
    return claimed


def every_place(jobs: Jobs) -> None:
    """A job in each place, and one in active whose lease ran out (the reaper's)."""
    client = jobs.connector.client
    enqueue_n(jobs, 2, max_attempts=2)
    enqueue_n(jobs, 1, due_ms=server_ms(client) + 20)
    enqueue_n(jobs, 1, due_ms=server_ms(client) + 60000)
    first, second = claim(jobs, 2, lease_ms=1)
    jobs.complete(QUEUE, first.id, first.token)
    jobs.retry(QUEUE, second.id, second.token, error=error_json(), summary="x", give_up=True)
    enqueue_n(jobs, 3, result_ttl_ms=1, max_attempts=2)
    claim(jobs, 1, lease_ms=1)
    time.sleep(0.03)  # the scheduled job is due, the leases have run out


Held = tuple[str, int]  # a job's (id, token); the token is 0 for a job not held


def nothing(jobs: Jobs, scheduler: Scheduler) -> Held:
    every_place(jobs)
    return ("", 0)


def held(jobs: Jobs, scheduler: Scheduler) -> Held:
    """A job held now, on a fresh lease."""
    every_place(jobs)
    (c,) = claim(jobs, 1)
    return c.id, c.token


def waiting(jobs: Jobs, scheduler: Scheduler) -> Held:
    every_place(jobs)
    return enqueue_n(jobs, 1)[0], 0


def scheduled(jobs: Jobs, scheduler: Scheduler) -> Held:
    every_place(jobs)
    return enqueue_n(jobs, 1, due_ms=server_ms(jobs.connector.client) + 60000)[0], 0


def a_schedule(jobs: Jobs, scheduler: Scheduler) -> Held:
    every_place(jobs)
    scheduler.sync([every(overlap="allow")])
    backdate(jobs.connector.client, QUEUE, "beat", server_ms(jobs.connector.client) - 2000)
    return ("", 0)


def a_paused_schedule(jobs: Jobs, scheduler: Scheduler) -> Held:
    a_schedule(jobs, scheduler)
    scheduler.pause(QUEUE, "beat")
    return ("", 0)


@dataclass(frozen=True)
class Case:
    script: str
    setup: Callable[[Jobs, Scheduler], Held]
    act: Callable[[Jobs, Scheduler, Held], Any]


def retry(**options: Any) -> Callable[[Jobs, Scheduler, Held], Any]:
    return lambda jobs, s, job: jobs.retry(QUEUE, *job, error=error_json(), summary="x", **options)


CASES: dict[str, Case] = {
    "enqueue": Case("enqueue", nothing, lambda jobs, s, _: jobs.enqueue(QUEUE, new())),
    "enqueue-scheduled": Case(
        "enqueue",
        nothing,
        lambda jobs, s, _: jobs.enqueue(QUEUE, new(due_ms=server_ms(jobs.connector.client) + 9000)),
    ),
    "claim": Case("claim", nothing, lambda jobs, s, _: jobs.claim(QUEUE, WORKER, count=5)),
    "start": Case("start", held, lambda jobs, s, job: jobs.start_many(WORKER, [(QUEUE, *job)])),
    "complete": Case("complete", held, lambda jobs, s, job: jobs.complete(QUEUE, *job)),
    "retry-pending": Case("retry", held, retry()),
    "retry-scheduled": Case("retry", held, retry(backoff_ms=60000)),
    "retry-dead": Case("retry", held, retry(give_up=True)),
    "release": Case("release", held, lambda jobs, s, job: jobs.release(QUEUE, *job)),
    "crashed": Case(
        "crashed",
        held,
        lambda jobs, s, job: jobs.crashed(QUEUE, *job, why="killed", crash_budget=1),
    ),
    "extend": Case("extend", held, lambda jobs, s, job: jobs.extend(QUEUE, *job, lease_ms=9000)),
    "reap": Case("reap", nothing, lambda jobs, s, _: jobs.reap(QUEUE)),
    "promote": Case("promote", nothing, lambda jobs, s, _: jobs.promote(QUEUE)),
    "trim": Case("trim", nothing, lambda jobs, s, _: jobs.trim(QUEUE, "completed")),
    "bound": Case("bound", nothing, lambda jobs, s, _: jobs.bound(QUEUE, "completed")),
    "purge": Case("purge", nothing, lambda jobs, s, _: jobs.purge(QUEUE, "completed")),
    "retry_dead": Case("retry_dead", nothing, lambda jobs, s, _: jobs.retry_dead(QUEUE)),
    "cancel-active": Case("cancel", held, lambda jobs, s, job: jobs.cancel(QUEUE, job[0])),
    "cancel-waiting": Case("cancel", waiting, lambda jobs, s, job: jobs.cancel(QUEUE, job[0])),
    "delete": Case("delete", held, lambda jobs, s, job: jobs.delete(QUEUE, job[0])),
    "run_now": Case("run_now", scheduled, lambda jobs, s, job: jobs.run_now(QUEUE, job[0])),
    "page": Case("page", nothing, lambda jobs, s, _: jobs.page(QUEUE, "completed")),
    "stats": Case("stats", nothing, lambda jobs, s, _: jobs.stats(QUEUE)),
    "fire": Case("fire", a_schedule, lambda jobs, s, _: s.fire_due([QUEUE])),
    "schedule_due": Case("schedule_due", a_schedule, lambda jobs, s, _: s.fire_due([QUEUE])),
    "schedule_list": Case("schedule_list", a_schedule, lambda jobs, s, _: s.read(QUEUE)),
    "schedule_run_now": Case(
        "schedule_run_now", a_schedule, lambda jobs, s, _: s.run_now(QUEUE, "beat")
    ),
    "schedule_sync": Case(
        "schedule_sync", a_schedule, lambda jobs, s, _: s.sync([every(seconds=2)])
    ),
    "schedule_orphan": Case("schedule_orphan", a_schedule, lambda jobs, s, _: s.sync([])),
    "schedule_pause": Case("schedule_pause", a_schedule, lambda jobs, s, _: s.pause(QUEUE, "beat")),
    "schedule_resume": Case(
        "schedule_resume", a_paused_schedule, lambda jobs, s, _: s.resume(QUEUE, "beat")
    ),
    "schedule_remove": Case(
        "schedule_remove", a_schedule, lambda jobs, s, _: s.remove(QUEUE, "beat")
    ),
}


def places(name: str) -> list[str]:
    return [key for key in script.load(name).signature.keys if key in script.PLACES]


def key_of(place: str) -> str:
    return K.state_set("completed") if place == "state_set" else getattr(K, place)


PARAMS = [(case, place) for case in CASES for place in places(CASES[case].script)]


def keyspace(client) -> dict[str, bytes]:
    return {key: client.dump(key) for key in client.scan_iter("*")}


@pytest.mark.parametrize("case, place", PARAMS, ids=[f"{c}-{p}" for c, p in PARAMS])
def test_a_place_of_another_type_refuses_the_script_and_changes_nothing(
    jobs, server_kind, case, place
):
    if server_kind == "redis":  # the guard is the script's own Lua: Valkey and a cluster
        pytest.skip("run on Valkey and on a cluster (the same Lua on Redis adds only time)")
    spec, client = CASES[case], jobs.connector.client
    scheduler = Scheduler(jobs)
    job = spec.setup(jobs, scheduler)
    key = key_of(place)
    client.delete(key)
    client.hset(key, "planted", "1")
    before = keyspace(client)
    try:
        out = spec.act(jobs, scheduler, job)
    except CorruptKey as exc:
        out = [exc]
    refused = [r for r in out if isinstance(r, CorruptKey)] if isinstance(out, list) else []
    if refused:  # raised, or a batch's per-job answer (start)
        assert key in str(refused[0]) and "not a sorted set" in str(refused[0])
    else:  # the scheduler's passes handle each schedule apart: refused all the same
        assert spec.script in {"fire", "schedule_due", "schedule_sync", "schedule_orphan"}
    after = keyspace(client)
    assert after == before


def test_every_script_that_names_a_place_has_a_case():
    named = {s.name for s in script.all_scripts() if places(s.name)}
    assert named == {case.script for case in CASES.values()}


def test_a_worker_claims_from_its_other_queues_meanwhile_and_the_repaired_one_goes_on(jobs):
    """The reviewer's loss (1,000 pending jobs there; 300 here), active planted as a
    hash, a live worker. Before, each refused claim popped a batch into no place. Now the
    broken queue's claims are refused with nothing changed, the worker serves its other
    queue meanwhile, and after the repair every job of the first queue runs."""
    client = jobs.connector.client
    broken = enqueue_n(jobs, 300)
    healthy = [e.id for e in jobs.enqueue_many("other", [new() for _ in range(20)])]
    client.hset(K.active, "planted", "1")
    done: list[str] = []
    worker = Worker(jobs, [QUEUE, "other"], lambda c: done.append(c.id) or Success("null"),
                    lease_ms=5000, grace_s=5.0)  # fmt: skip
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while set(healthy) - set(done) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert set(done) == set(healthy), "the worker stopped serving the healthy queue"
        assert client.zcard(K.pending) == 300  # none popped into no place
        client.delete(K.active)  # the operator's repair
        deadline = time.monotonic() + 60
        while len(done) < 320 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(10)
    assert set(done) == set(healthy) | set(broken)
    assert set(assert_one_place(jobs).values()) == {"completed"}


def test_a_burst_worker_waits_for_a_refused_queue_after_another_one_recovered(jobs):
    """A refusal is forgotten once its queue answers: before, the recovered queue's old
    refusal time (already past) was taken as when to ask again, and a burst worker
    whose other queue was refused meanwhile took that for "nothing to do" and ended
    with that queue's job left pending (the reviewer's reproduction)."""
    client = jobs.connector.client
    other = QueueKeys.of("other")
    (first,) = enqueue_n(jobs, 1)
    client.hset(K.active, "planted", "1")  # this queue is refused from the start

    def handler(claimed):
        if "trigger" in claimed.job.payload:
            client.delete(K.active)  # the first queue recovers; once it has answered...
            time.sleep(1.3)
            client.hset(other.dead, "planted", "1")  # ...the other one breaks,
            jobs.enqueue("other", new())  # with a job waiting in it, for 0.3 s
            threading.Timer(0.3, client.delete, [other.dead]).start()
        return Success("null")

    jobs.enqueue("other", new('{"n": "trigger"}'))
    worker = Worker(jobs, [QUEUE, "other"], handler, burst=True, lease_ms=5000, grace_s=5.0)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    thread.join(30)
    worker.stop()
    assert not thread.is_alive()
    assert client.zcard(other.pending) == 0, "the burst ended with the other queue's job left"
    assert jobs.get(QUEUE, first).state == "completed"
