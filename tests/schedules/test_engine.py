"""Schedules on real servers (Valkey 8, Redis 7, the 3-master cluster): one script per change.

No test waits for a tick: a stopped scheduler is simulated the way it looks on the
server, a next fire time in the past (``backdate``); the server's clock does the rest.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from echomq_django.engine import script
from echomq_django.engine.errors import EchoMQError, InvalidSchedule, JobNotFound, WrongState
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.reaper import Reaper
from echomq_django.engine.scheduler import Scheduler

from .conftest import PAYLOAD, backdate, every, expected_id, tick_of, whole_second


def server_now(scheduler: Scheduler, queue: str = "q") -> int:
    return scheduler.read(queue)[0]


def last_second(scheduler: Scheduler) -> int:
    """The latest tick of a one-second schedule that is due now (read early in it)."""
    return whole_second(lambda: server_now(scheduler))


def fired_ids(scheduler: Scheduler, queues=("q",)) -> list[str]:
    return [i for f in scheduler.fire_due(list(queues)).fired for i in f.ids]


def record(scheduler: Scheduler, name: str = "beat", queue: str = "q"):
    found = scheduler.get(queue, name)
    assert found is not None
    return found


def test_a_fired_tick_is_the_row_enqueue_stores_under_an_id_derived_from_the_tick(
    scheduler, jobs, redis_client
):
    assert scheduler.sync([every(overlap="allow")]) == {"q/beat": "created"}
    tick = last_second(scheduler)
    backdate(redis_client, "q", "beat", tick - 2000)  # two ticks went unfired before this one
    (job_id,) = fired_ids(scheduler)  # catch_up latest: the most recent due tick, once
    assert job_id == expected_id("q", "beat", tick) and tick_of(job_id) == tick
    enqueued = jobs.enqueue("q", NewJob(payload=PAYLOAD, task="tests.django.tasks.add",
                                        priority=3, max_attempts=4))  # fmt: skip
    keys = QueueKeys.of("q")
    rows = [redis_client.hgetall(keys.job(i)) for i in (job_id, enqueued.id)]
    for row in rows:
        for volatile in (b"id", b"enqueued_at", b"seq"):
            row.pop(volatile)
    assert rows[0] == rows[1] and list(rows[0]) == list(rows[1])  # same fields, same order
    assert jobs.stats("q").metrics["enqueued"] == 2
    mine = record(scheduler)
    assert (mine.last_job, mine.last_tick, mine.counter("fired"), mine.counter("missed")) == (
        job_id, tick, 1, 2
    )  # fmt: skip
    assert mine.next_ms == tick + 1000


def test_racing_schedulers_fire_each_tick_exactly_once(jobs, redis_client):
    schedulers = [Scheduler(jobs) for _ in range(8)]
    schedulers[0].sync([every(overlap="allow", catch_up="all")])
    backdate(redis_client, "q", "beat", last_second(schedulers[0]) - 2000)
    barrier = threading.Barrier(len(schedulers))
    passes = []

    def race(s: Scheduler) -> None:
        barrier.wait()
        passes.append(s.fire_due(["q"]))

    threads = [threading.Thread(target=race, args=(s,)) for s in schedulers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    ids = [i for p in passes for f in p.fired for i in f.ids]
    ticks = sorted(tick_of(i) for i in ids)
    assert len(ids) == len(set(ids)) == len(ticks) >= 3  # each due tick once, none twice
    assert ticks == list(range(ticks[0], ticks[-1] + 1000, 1000))  # none missing
    assert jobs.stats("q").counts["pending"] == len(ids)


def test_a_plan_that_lost_the_race_changes_nothing(scheduler, connector, redis_client):
    scheduler.sync([every(overlap="allow")])
    backdate(redis_client, "q", "beat", last_second(scheduler))
    now, _, name, score, flat = connector.run(
        script.load("schedule_due"), [QueueKeys.of("q").schedules], [10]
    )
    call, _, _ = Scheduler._fire_call(QueueKeys.of("q"), name, score, flat, now)
    first, second = connector.run_many([call, call])  # two schedulers, planned from one read
    assert first[0] == "fired" and first[1] == 1
    assert second == ["stale", 0, 0]


def test_catch_up_after_an_outage_follows_each_policy(scheduler, jobs, redis_client):
    scheduler.sync(
        [
            every("latest", overlap="allow"),
            every("all", overlap="allow", catch_up="all"),
            every("none", overlap="allow", catch_up="none", grace_ms=0),
        ]
    )
    now = server_now(scheduler)
    first = now // 1000 * 1000 - 5000  # five ticks before the latest went unfired
    for name in ("latest", "all", "none"):
        backdate(redis_client, "q", name, first)
    fired = {f.name: f for f in scheduler.fire_due(["q"]).fired}
    assert [tick_of(i) - first for i in fired["latest"].ids] == [5000]
    assert [tick_of(i) - first for i in fired["all"].ids] == [0, 1000, 2000, 3000, 4000, 5000]
    assert fired["none"].ids == ()  # the latest tick is late too: grace 0
    missed = {n: record(scheduler, n).counter("missed") for n in ("latest", "all", "none")}
    assert missed == {"latest": 5, "all": 0, "none": 6}
    assert all(record(scheduler, n).next_ms > now for n in ("latest", "all", "none"))


def test_catch_up_none_fires_every_tick_a_running_reaper_fires_whatever_the_grace(
    scheduler, jobs, caplog
):
    """A reaper fires a tick a few ms after it: with grace 0 every tick was given up as
    missed "while no scheduler ran" though one ran all along."""
    scheduler.sync([every("strict", overlap="allow", catch_up="none", grace_ms=0)])
    reaper = Reaper(jobs, ["q"], discover=False)
    thread = threading.Thread(target=reaper.run)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while record(scheduler, "strict").counter("fired") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        reaper.stop()
        thread.join(10)
    stored = record(scheduler, "strict")
    assert (stored.counter("fired") >= 2, stored.counter("missed")) == (True, 0)
    assert "missed" not in caplog.text


def test_overlap_skip_skips_ticks_while_the_last_job_is_unfinished(scheduler, jobs, redis_client):
    scheduler.sync([every()])  # overlap "skip" is the default
    backdate(redis_client, "q", "beat", last_second(scheduler))
    (job_id,) = fired_ids(scheduler)
    (claimed,) = jobs.claim("q", "w1").jobs
    backdate(redis_client, "q", "beat", last_second(scheduler))
    (skipped,) = scheduler.fire_due(["q"]).fired
    assert (skipped.outcome, skipped.ids, skipped.skipped) == ("skipped", (), 1)
    assert record(scheduler).counter("skipped") == 1 and record(scheduler).last_job == job_id
    jobs.complete("q", claimed.id, claimed.token)
    while last_second(scheduler) == tick_of(job_id):  # that tick is done: wait for the next
        time.sleep(0.02)
    backdate(redis_client, "q", "beat", last_second(scheduler))
    (again,) = fired_ids(scheduler)
    assert tick_of(again) > tick_of(job_id)


def test_an_edit_between_deploys_takes_effect_without_a_duplicate(scheduler, jobs, redis_client):
    scheduler.sync([every(overlap="allow")])
    backdate(redis_client, "q", "beat", last_second(scheduler))
    (fired,) = fired_ids(scheduler)
    last_tick = record(scheduler).last_tick
    unchanged = record(scheduler).next_ms
    assert scheduler.sync([every(overlap="allow")]) == {"q/beat": "unchanged"}
    assert record(scheduler).next_ms == unchanged  # a restart shifts nothing

    edited = every(overlap="allow", seconds=60)  # the next deploy: every minute
    assert scheduler.sync([edited]) == {"q/beat": "edited"}
    mine = record(scheduler)
    assert mine.next_ms > last_tick and mine.next_ms % 60_000 == 0
    assert mine.fields["every_ms"] == "60000" and mine.counter("fired") == 1  # record kept
    # Even planned again from before the edit, the tick already fired is not a second job.
    backdate(redis_client, "q", "beat", last_tick)
    assert fired_ids(scheduler) == [] and jobs.stats("q").counts["pending"] == 1
    assert jobs.get("q", fired) is not None


def test_a_schedule_removed_from_code_is_orphaned_until_removed_or_declared_again(
    scheduler, redis_client
):
    other = every("other", seconds=3600)  # never due during the test
    scheduler.sync([every(), other])
    assert scheduler.sync([other], ["q"]) == {"q/other": "unchanged", "q/beat": "orphaned"}
    orphan = record(scheduler)
    assert (orphan.status, orphan.next_ms) == ("orphaned", None)
    backdate(redis_client, "q", "beat", last_second(scheduler))  # even with a planted time
    assert fired_ids(scheduler) == []
    with pytest.raises(WrongState):
        scheduler.run_now("q", "beat")
    assert scheduler.sync([every(), other]) == {
        "q/beat": "restored", "q/other": "unchanged"
    }  # fmt: skip
    scheduler.sync([], ["q"])
    scheduler.remove("q", "beat")
    assert scheduler.get("q", "beat") is None
    with pytest.raises(JobNotFound):
        scheduler.remove("q", "beat")


def test_pause_resume_and_run_now_are_one_script_each(scheduler, jobs, redis_client):
    scheduler.sync([every()])
    scheduler.pause("q", "beat")
    assert record(scheduler).status == "paused" and record(scheduler).next_ms is None
    with pytest.raises(WrongState, match="paused already"):
        scheduler.pause("q", "beat")
    assert scheduler.sync([every()]) == {"q/beat": "unchanged"}  # a restart keeps it paused
    job_id = scheduler.run_now("q", "beat")  # paused or not: the operator asked
    assert jobs.get("q", job_id).state == "pending" and record(scheduler).last_job == job_id
    assert fired_ids(scheduler) == []
    next_ms = scheduler.resume("q", "beat")
    assert record(scheduler).next_ms == next_ms > server_now(scheduler) - 1000
    with pytest.raises(WrongState, match="not paused"):
        scheduler.resume("q", "beat")
    with pytest.raises(WrongState, match="declared in code"):
        scheduler.remove("q", "beat")
    for action in (scheduler.pause, scheduler.run_now, scheduler.resume):
        with pytest.raises(JobNotFound):
            action("q", "nope")


@pytest.mark.parametrize("name", ["", "a b", "{q}", "x:y", "é", "\udcff", "n" * 101])
def test_ill_formed_names_are_refused_before_any_key(scheduler, redis_client, name):
    for action in (scheduler.pause, scheduler.resume, scheduler.run_now, scheduler.remove):
        with pytest.raises(InvalidSchedule):
            action("q", name)
    assert redis_client.dbsize() == 0


def test_a_corrupt_schedule_is_logged_and_the_others_still_fire(scheduler, redis_client, caplog):
    scheduler.sync([every("good", overlap="allow")])
    keys = QueueKeys.of("q")
    redis_client.set(keys.schedule("bad"), "planted")
    redis_client.zadd(keys.schedules, {"bad": 1, "ill formed": 1})
    outcomes = scheduler.sync([every("good", overlap="allow"), every("bad")])
    assert outcomes == {"q/good": "unchanged", "q/bad": "failed"}
    backdate(redis_client, "q", "good", last_second(scheduler))
    with caplog.at_level(logging.ERROR, "echomq.scheduler"):
        result = scheduler.fire_due(["q"])
    assert [f.name for f in result.fired] == ["good"] and len(result.fired[0].ids) == 1
    assert "cannot fire" in caplog.text
    assert result.wait_ms is not None and 0 < result.wait_ms <= 1000  # "bad" does not spin it


def test_every_schedule_script_runs_as_the_minimal_acl_user(make_acl_server):
    """Commands a script calls are checked against the caller's ACL: zscore is needed."""
    from echomq_django.engine.acl import worker_acl_rules
    from echomq_django.engine.connector import Connector

    acl = make_acl_server(worker_acl_rules())
    connector = Connector.from_url(acl.url)
    try:
        scheduler = Scheduler(Jobs(connector))
        hourly = every("other", seconds=3600)  # never due during the test
        scheduler.sync([every(overlap="allow"), hourly])
        tick = last_second(scheduler)
        connector.client.zadd(QueueKeys.of("q").schedules, {"beat": tick})
        assert fired_ids(scheduler) == [expected_id("q", "beat", tick)]
        scheduler.pause("q", "beat")
        scheduler.run_now("q", "beat")
        scheduler.resume("q", "beat")
        assert scheduler.sync([every(overlap="allow")], ["q"])["q/other"] == "orphaned"
        scheduler.remove("q", "other")
    finally:
        connector.close()


def test_fire_refuses_arguments_that_are_not_numbers_before_any_write(
    scheduler, connector, redis_client
):
    scheduler.sync([every(overlap="allow")])
    keys = QueueKeys.of("q")
    call_keys = [keys.pending, keys.scheduled, keys.seq, keys.metrics, keys.wake,
                 keys.schedules, keys.schedule("beat")]  # fmt: skip
    before = {k: redis_client.dump(k) for k in call_keys}
    for args in (["beat", "x", 1, 0, 1], ["beat", 1, 1, 0, "1e", b"\xff"]):
        with pytest.raises(EchoMQError, match="not a number"):
            connector.run(script.load("fire"), call_keys, args)
    assert {k: redis_client.dump(k) for k in call_keys} == before
