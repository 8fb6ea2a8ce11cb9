"""An edit at a scheduler's start, across downtime: no tick dropped without being counted.

A schedule whose timing is unchanged (its job edited, or an upgrade storing one more
of its task's options) keeps its next fire time: the ticks due while no scheduler ran
fire by its catch-up policy. A new timing fires from now, and the old timing's due
ticks are counted as missed, in the sync's own script call.
"""

from __future__ import annotations

from dataclasses import replace

from echomq_django.engine.keyspace import QueueKeys

from .conftest import backdate, every, tick_of, whole_second


def test_a_new_timing_counts_the_old_timings_due_ticks_as_missed(scheduler, redis_client):
    scheduler.sync([every(seconds=2, catch_up="all", overlap="allow")])
    before = scheduler.read("q")[0]
    stopped = before // 2000 * 2000 - 6000  # the reaper stopped 6 s ago: 4 ticks due
    backdate(redis_client, "q", "beat", stopped)
    edited = every(seconds=3, catch_up="all", overlap="allow")
    assert scheduler.sync([edited]) == {"q/beat": "edited"}
    after = scheduler.read("q")[0]
    record = scheduler.get("q", "beat")
    assert record is not None
    assert (after // 2000 - stopped // 2000 + 1) >= record.counter("missed") >= 4
    assert record.next_ms is not None and before < record.next_ms <= after + 3000
    assert record.next_ms % 3000 == 0


def test_a_job_edit_keeps_the_fire_time_and_fires_the_due_ticks(scheduler, redis_client):
    scheduler.sync([every(seconds=2, catch_up="all", overlap="allow")])
    stopped = scheduler.read("q")[0] // 2000 * 2000 - 6000
    backdate(redis_client, "q", "beat", stopped)
    schedule = every(seconds=2, catch_up="all", overlap="allow")
    edited = replace(schedule, job=replace(schedule.job, payload=schedule.job.payload + " "))
    assert scheduler.sync([edited]) == {"q/beat": "edited"}
    assert scheduler.get("q", "beat").next_ms == stopped  # type: ignore[union-attr]
    ids = [i for f in scheduler.fire_due(["q"]).fired for i in f.ids]
    assert [tick_of(i) for i in ids][:4] == [
        stopped,
        stopped + 2000,
        stopped + 4000,
        stopped + 6000,
    ]
    record = scheduler.get("q", "beat")
    assert record is not None and record.counter("missed") == 0
    payloads = {redis_client.hget(QueueKeys.of("q").job(i), "payload") for i in ids}
    assert payloads == {edited.job.payload.encode()}


def test_an_upgrade_that_stores_a_new_field_drops_and_repeats_no_tick(scheduler, redis_client):
    """A record synced by a release that did not store timeout_ms (so another digest), the
    reaper stopped 3 s for the deploy: the new release fires every tick once."""
    schedule = every(seconds=1, catch_up="all", overlap="allow")
    scheduler.sync([schedule])
    keys = QueueKeys.of("q")
    redis_client.hdel(keys.schedule("beat"), "timeout_ms")
    redis_client.hset(keys.schedule("beat"), "digest", "the older release's")
    stopped = whole_second(lambda: scheduler.read("q")[0]) - 3000
    backdate(redis_client, "q", "beat", stopped)
    assert scheduler.sync([schedule]) == {"q/beat": "edited"}
    record = scheduler.get("q", "beat")
    assert record is not None and record.next_ms == stopped and record.fields["timeout_ms"] == "0"
    fired = [tick_of(i) for f in scheduler.fire_due(["q"]).fired for i in f.ids]
    assert fired[:4] == [stopped, stopped + 1000, stopped + 2000, stopped + 3000]
    assert scheduler.sync([schedule]) == {"q/beat": "unchanged"}  # the next restart
    record = scheduler.get("q", "beat")
    assert record is not None and record.counter("missed") == 0
    assert record.counter("fired") == len(fired) == len(set(fired))
