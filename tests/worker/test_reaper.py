"""The engine reaper on real servers: each sweep, discovery, bounded calls."""

from __future__ import annotations

import threading
import time

import pytest

from echomq_django.engine.errors import ServerUnavailable
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.reaper import Reaper


def expire_lease(jobs, queue: str, n: int = 1) -> list[str]:
    """Enqueue ``n`` jobs and claim them with a 1 ms lease, so they are expired at once."""
    ids = [jobs.enqueue(queue, NewJob(payload="{}")).id for _ in range(n)]
    jobs.claim(queue, "gone", count=n, lease_ms=1)
    time.sleep(0.005)
    return ids


def test_one_tick_reaps_promotes_and_trims(jobs):
    (expired,) = expire_lease(jobs, "q")
    scheduled = jobs.enqueue("q", NewJob(payload="{}", due_ms=int(time.time() * 1000) + 30)).id
    finished = jobs.enqueue("q", NewJob(payload="{}", result_ttl_ms=0)).id
    (claimed,) = jobs.claim("q", "w").jobs  # the only ready job: the others are active / not due
    jobs.complete("q", claimed.id, claimed.token)
    time.sleep(0.04)

    (sweep,) = Reaper(jobs, ["q"], discover=False).tick()
    assert (sweep.queue, sweep.reaped.moved, sweep.promoted.moved) == ("q", 1, 1)
    assert sweep.trimmed_completed.moved == 1 and jobs.get("q", finished) is None
    assert jobs.get("q", expired).state == "pending" and jobs.get("q", scheduled).state == "pending"


def test_expired_leases_go_back_to_pending_without_spending_an_attempt(jobs):
    back = expire_lease(jobs, "q", 2)
    last = jobs.enqueue("q", NewJob(payload="{}", max_attempts=1)).id
    jobs.claim("q", "gone", lease_ms=1, start_now=1)  # it ran: it comes back, solo
    time.sleep(0.005)
    (sweep,) = Reaper(jobs, ["q"], discover=False).tick()
    assert (sweep.reaped.moved, sweep.reaped.dead) == (3, 0)
    assert [jobs.get("q", i).state for i in [*back, last]] == ["pending"] * 3
    assert jobs.get("q", last).solo and jobs.get("q", last).counted_attempts == 0


def test_retention_is_trimmed(jobs):
    jobs.enqueue("q", NewJob(payload="{}", result_ttl_ms=0))
    jobs.enqueue("q", NewJob(payload="{}", max_attempts=1, dead_ttl_ms=0))
    done, failed = jobs.claim("q", "w", count=2).jobs
    jobs.complete("q", done.id, done.token)
    error = '{"exception_class_path": "x", "traceback": ""}'
    jobs.retry("q", failed.id, failed.token, error=error, summary="x")
    time.sleep(0.002)
    (sweep,) = Reaper(jobs, ["q"], discover=False).tick()
    assert (sweep.trimmed_completed.moved, sweep.trimmed_dead.moved) == (1, 1)
    assert jobs.get("q", done.id) is None and jobs.get("q", failed.id) is None


def test_queues_are_discovered_from_the_registry_of_queues_in_use(jobs):
    expire_lease(jobs, "only-in-data")
    reaper = Reaper(jobs, ["configured"])
    assert reaper.queues_to_sweep() == ["configured", "only-in-data"]
    sweeps = {s.queue: s for s in reaper.tick()}
    assert sweeps["only-in-data"].reaped.moved == 1


def test_each_sweep_is_many_bounded_calls(jobs):
    expire_lease(jobs, "q", 25)
    (sweep,) = Reaper(jobs, ["q"], discover=False, limit=10).tick()
    assert sweep.reaped.moved == 25 and sweep.reaped.calls == 3


def test_run_ticks_until_stopped(jobs):
    reaper = Reaper(jobs, ["q"], discover=False, interval_s=0.02)
    thread = threading.Thread(target=reaper.run, daemon=True)
    thread.start()
    (job_id,) = expire_lease(jobs, "q")
    deadline = time.monotonic() + 5
    while jobs.get("q", job_id).state != "pending" and time.monotonic() < deadline:
        time.sleep(0.01)
    reaper.stop()
    thread.join(2)
    assert not thread.is_alive() and jobs.get("q", job_id).state == "pending"


def test_bad_options_are_refused(jobs):
    with pytest.raises(ValueError, match="interval"):
        Reaper(jobs, ["q"], interval_s=0)
    with pytest.raises(ValueError, match="limit"):
        Reaper(jobs, ["q"], limit=5000)
    with pytest.raises(ValueError, match="nothing to sweep"):
        Reaper(jobs, [], discover=False)
    with pytest.raises(ValueError, match="queue name"):
        Reaper(jobs, ["{bad}"])


def test_two_reapers_racing_move_each_expired_job_exactly_once(jobs):
    expire_lease(jobs, "q", 600)
    reapers = [Reaper(jobs, ["q"], discover=False, limit=50) for _ in range(2)]
    barrier, sweeps = threading.Barrier(2), []

    def race(reaper: Reaper) -> None:
        barrier.wait()
        sweeps.append(reaper.sweep("q"))

    threads = [threading.Thread(target=race, args=(r,)) for r in reapers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sum(s.reaped.moved for s in sweeps) == 600
    counts = jobs.stats("q").counts
    assert (counts["pending"], counts["active"]) == (600, 0)
    assert jobs.stats("q").metrics["reaped"] == 600


def test_a_corrupt_queue_does_not_stop_the_sweep_of_the_others(jobs, redis_client):
    jobs.register_queue("broken")
    redis_client.set("emq:{broken}:active", "not a sorted set")  # planted corruption
    (expired,) = expire_lease(jobs, "q")
    sweeps = Reaper(jobs, ["broken", "q"], discover=False).tick()
    assert [s.queue for s in sweeps] == ["q"]
    assert jobs.get("q", expired).state == "pending"


# -- the jobs it ends dead: told once each, whatever fails after ------------------------


def cancelled_while_their_worker_is_gone(jobs, n: int) -> list[str]:
    ids = [jobs.enqueue("q", NewJob(payload="{}")).id for _ in range(n)]
    for c in jobs.claim("q", "gone", count=n, lease_ms=1).jobs:
        assert jobs.cancel("q", c.id) == "cancelling"
    time.sleep(0.005)
    return ids


def test_a_failing_promote_after_the_reap_loses_no_ended_job(jobs, monkeypatch):
    ids = cancelled_while_their_worker_is_gone(jobs, 2)
    told: list[str] = []
    reaper = Reaper(jobs, ["q"], discover=False, ended_outside=lambda q, i: told.append(i))
    calls: list[int] = []
    promote = jobs.promote

    def promote_once_refused(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise ServerUnavailable("the connection was lost")
        return promote(*args, **kwargs)

    monkeypatch.setattr(jobs, "promote", promote_once_refused)
    with pytest.raises(ServerUnavailable):
        reaper.tick()
    reaper.tick()
    assert {jobs.get("q", i).state for i in ids} == {"dead"}
    assert sorted(told) == sorted(ids)


def test_a_lost_server_between_bounded_reaps_loses_no_ended_job(jobs, monkeypatch):
    ids = cancelled_while_their_worker_is_gone(jobs, 3)
    run, reaps = jobs.connector.run, []

    def second_reap_refused(script, keys, args=()):
        if script.name == "reap":
            reaps.append(1)
            if len(reaps) == 2:
                raise ServerUnavailable("the connection was lost")
        return run(script, keys, args)

    monkeypatch.setattr(jobs.connector, "run", second_reap_refused)
    told: list[str] = []
    reaper = Reaper(jobs, ["q"], discover=False, limit=1, ended_outside=lambda q, i: told.append(i))
    with pytest.raises(ServerUnavailable):
        reaper.tick()
    reaper.tick()
    assert {jobs.get("q", i).state for i in ids} == {"dead"}
    assert sorted(told) == sorted(ids)


def test_two_reapers_racing_tell_each_ended_job_once(jobs):
    ids = cancelled_while_their_worker_is_gone(jobs, 200)
    told: list[str] = []
    lock = threading.Lock()

    def tell(queue: str, job_id: str) -> None:
        with lock:
            told.append(job_id)

    reapers = [Reaper(jobs, ["q"], discover=False, limit=7, ended_outside=tell) for _ in range(2)]
    threads = [threading.Thread(target=r.tick) for r in reapers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(told) == sorted(ids)
