"""The pure tick function: cron in a zone (DST computed, not waited for), intervals, catch-up."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echomq_django.engine.errors import InvalidSchedule
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.schedules import Schedule
from echomq_django.engine.timing import CATCH_UP_MAX, InvalidCron, Timing, UnknownTimeZone, plan

PARIS = ZoneInfo("Europe/Paris")


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def local(ms_value: int, tz: ZoneInfo = PARIS) -> str:
    return datetime.fromtimestamp(ms_value / 1000, tz).strftime("%Y-%m-%d %H:%M %Z")


def ticks(timing: Timing, start: datetime, n: int) -> list[str]:
    out, t = [], ms(start)
    for _ in range(n):
        t = timing.next_after(t)
        out.append(local(t, ZoneInfo(timing.timezone)))
    return out


FIXED_TIMES = pytest.mark.parametrize(
    "cron", ["30 2 * * *", "0 30 2 * * *", "10 30 2 * * *"], ids=["5", "6", "6-at-10s"]
)


@FIXED_TIMES
def test_a_fixed_time_on_a_spring_forward_day_fires_once_at_the_first_minute_that_exists(cron):
    # 2026-03-29 in Paris: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that day.
    timing = Timing.parse(cron, 0, "Europe/Paris")
    assert ticks(timing, datetime(2026, 3, 27, 12, tzinfo=UTC), 3) == [
        "2026-03-28 02:30 CET",
        "2026-03-29 03:00 CEST",
        "2026-03-30 02:30 CEST",
    ]
    moved = timing.next_after(ms(datetime(2026, 3, 28, 12, tzinfo=UTC)))  # 03:00 (and 10 s)
    assert timing.next_after(moved - 1) == moved  # found from within its seconds too
    back = timing.due(ms(datetime(2026, 3, 30, 12, tzinfo=UTC)), 0, 3)  # fire's walk agrees
    assert [local(t) for t in back] == ["2026-03-30 02:30 CEST", "2026-03-29 03:00 CEST",
                                        "2026-03-28 02:30 CET"]  # fmt: skip


@FIXED_TIMES
def test_a_fixed_time_on_a_fall_back_day_fires_once_at_its_first_occurrence(cron):
    # 2026-10-25 in Paris: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    timing = Timing.parse(cron, 0, "Europe/Paris")
    fired = [timing.next_after(ms(datetime(2026, 10, 24, 12, tzinfo=UTC)))]
    for _ in range(2):
        fired.append(timing.next_after(fired[-1]))
    assert [local(t) for t in fired] == [
        "2026-10-25 02:30 CEST",
        "2026-10-26 02:30 CET",
        "2026-10-27 02:30 CET",
    ]
    # Asked from inside the repeated hour (after the first 02:30), it does not go back.
    second_pass = ms(datetime(2026, 10, 25, 1, 10, tzinfo=UTC))  # 02:10 CET, the second time
    assert local(timing.next_after(second_pass)) == "2026-10-26 02:30 CET"
    back = timing.due(ms(datetime(2026, 10, 26, 12, tzinfo=UTC)), 0, 3)
    assert [local(t) for t in back] == ["2026-10-26 02:30 CET", "2026-10-25 02:30 CEST",
                                        "2026-10-24 02:30 CEST"]  # fmt: skip


def test_a_seconds_field_that_is_not_fixed_follows_the_absolute_clock():
    timing = Timing.parse("*/30 30 2 * * *", 0, "Europe/Paris")  # 02:30:00 and 02:30:30
    autumn = ticks(timing, datetime(2026, 10, 25, 0, tzinfo=UTC), 4)  # the hour twice
    assert autumn == ["2026-10-25 02:30 CEST"] * 2 + ["2026-10-25 02:30 CET"] * 2


def test_wildcard_hours_follow_the_absolute_clock_through_both_transitions():
    timing = Timing.parse("0,30 * * * *", 0, "Europe/Paris")
    autumn = ticks(timing, datetime(2026, 10, 25, 0, 15, tzinfo=UTC), 4)  # from 02:15 CEST
    assert autumn == [
        "2026-10-25 02:30 CEST",
        "2026-10-25 02:00 CET",
        "2026-10-25 02:30 CET",
        "2026-10-25 03:00 CET",
    ]
    spring = ticks(timing, datetime(2026, 3, 29, 0, 15, tzinfo=UTC), 3)  # from 01:15 CET
    assert spring == ["2026-03-29 01:30 CET", "2026-03-29 03:00 CEST", "2026-03-29 03:30 CEST"]


@settings(max_examples=60, deadline=None)
@given(
    expr=st.sampled_from(
        ["30 2 * * *", "0,30 * * * *", "15 1-3 * * *", "*/20 * * * * *", "10 30 2 * * *"]
    ),
    start=st.integers(ms(datetime(2026, 3, 28, tzinfo=UTC)), ms(datetime(2026, 3, 30, tzinfo=UTC)))
    | st.integers(ms(datetime(2026, 10, 24, tzinfo=UTC)), ms(datetime(2026, 10, 26, tzinfo=UTC))),
)
def test_walking_back_finds_exactly_the_ticks_walking_forward_finds(expr, start):
    """fire plans backwards from now (catch-up), advances forwards: they must agree."""
    timing = Timing.parse(expr, 0, "Europe/Paris")
    forward = [timing.next_after(start)]
    while len(forward) < 6:
        forward.append(timing.next_after(forward[-1]))
    assert forward == sorted(set(forward))  # strictly increasing: no tick twice
    back = timing.due(forward[-1], forward[0], 100)
    assert back == forward[::-1]


def test_intervals_are_multiples_of_the_interval_since_the_epoch():
    timing = Timing.parse("", 300_000, "Europe/Paris")  # the zone does not matter
    assert timing.next_after(1_000) == 300_000
    assert timing.next_after(300_000) == 600_000
    assert timing.due(900_001, 0, 2) == [900_000, 600_000]
    assert timing.count(900_001, 300_000) == 3
    assert timing.describe() == "every 5 min"


def test_latest_fires_the_most_recent_due_tick_once_and_counts_the_others_missed():
    timing = Timing.parse("", 1000, "UTC")
    chosen = plan(timing, "latest", 60_000, next_ms=10_000, now_ms=15_400)
    assert (chosen.ticks, chosen.missed, chosen.next_ms) == ([15_000], 5, 16_000)


def test_all_fires_every_due_tick_oldest_first_up_to_the_bound():
    timing = Timing.parse("", 1000, "UTC")
    chosen = plan(timing, "all", 60_000, next_ms=10_000, now_ms=15_400)
    assert (chosen.ticks, chosen.missed) == ([10_000, 11_000, 12_000, 13_000, 14_000, 15_000], 0)
    week = plan(timing, "all", 60_000, next_ms=0, now_ms=7 * 86_400_000)
    assert len(week.ticks) == CATCH_UP_MAX and week.ticks[-1] == 7 * 86_400_000
    assert week.missed == 7 * 86_400 + 1 - CATCH_UP_MAX  # counted exactly, not walked


def test_none_fires_only_a_tick_that_is_on_time():
    timing = Timing.parse("0 3 * * *", 0, "UTC")
    three = ms(datetime(2026, 6, 1, 3, tzinfo=UTC))
    on_time = plan(timing, "none", 60_000, next_ms=three, now_ms=three + 500)
    assert (on_time.ticks, on_time.missed) == ([three], 0)
    late = plan(timing, "none", 60_000, next_ms=three, now_ms=three + 6 * 3600_000)
    assert (late.ticks, late.missed) == ([], 1)
    assert late.next_ms == three + 86_400_000
    for policy in ("latest", "all"):  # the same outage: fired late, once
        assert plan(timing, policy, 60_000, three, three + 6 * 3600_000).ticks == [three]


def test_none_fires_the_tick_the_last_fire_planned_as_a_running_reaper_fires_it():
    timing = Timing.parse("", 1000, "UTC")
    planned = plan(timing, "none", 0, next_ms=10_000, now_ms=10_002)  # woken 2 ms after
    assert (planned.ticks, planned.missed) == ([10_000], 0)
    stalled = plan(timing, "none", 0, next_ms=10_000, now_ms=11_500)  # a stall, not a fire
    assert (stalled.ticks, stalled.missed) == ([], 2)
    later = plan(timing, "none", 0, next_ms=9_000, now_ms=10_002)  # 9 000 was not fired
    assert (later.ticks, later.missed) == ([], 2)


def test_nothing_is_due_before_the_next_fire_time():
    timing = Timing.parse("", 1000, "UTC")
    assert plan(timing, "latest", 0, next_ms=20_000, now_ms=19_999).ticks == []


@pytest.mark.parametrize(
    "cron, error",
    [
        ("61 * * * *", InvalidCron),
        ("* * * *", InvalidCron),
        ("0 0 31 2 *", InvalidCron),
        ("\x00\udcff", InvalidCron),
        ("١ * * * *", InvalidCron),  # an Arabic-Indic digit: int() would take it
        ("x" * 10_000, InvalidCron),
    ],
)
def test_bad_cron_expressions_are_refused_with_a_typed_error(cron, error):
    with pytest.raises(error):
        Timing.parse(cron, 0, "UTC")


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "", "\udcff"])
def test_unknown_zones_are_refused(zone):
    with pytest.raises(UnknownTimeZone):
        Timing.parse("0 3 * * *", 0, zone)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"cron": "0 3 * * *", "every_ms": 1000}, "exactly one"),
        ({"every_ms": 1500}, "whole seconds"),
        ({"every_ms": 1000, "catch_up": "some"}, "catch_up"),
        ({"every_ms": 1000, "overlap": "maybe"}, "overlap"),
        ({"every_ms": 1000, "catch_up": "all"}, "needs overlap 'allow'"),
        ({"every_ms": 1000, "name": "a b"}, "schedule name"),
        ({"every_ms": 1000, "grace_ms": -1}, "grace"),
    ],
)
def test_bad_schedules_are_refused(changes, message):
    fields = {"name": "s", "queue": "q", "job": NewJob(payload="{}"), **changes}
    with pytest.raises(InvalidSchedule, match=message):
        Schedule(**fields)


def test_the_digest_changes_with_the_definition_and_only_with_it():
    base = {"name": "s", "queue": "q", "every_ms": 60_000}
    one = Schedule(**base, job=NewJob(payload='{"a":1}', task="t"))
    same = Schedule(**base, job=NewJob(payload='{"a":1}', task="t"))  # another random id
    other = Schedule(**base, job=NewJob(payload='{"a":2}', task="t"))
    assert one.digest == same.digest != other.digest
    assert timedelta(milliseconds=one.every_ms) == timedelta(minutes=1)


def test_the_schedule_engine_imports_nothing_from_django():
    code = (
        "import sys, echomq_django.engine.reaper, echomq_django.engine.scheduler\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


CRON_PARTS = ["*", "*/0", "0", "59", "60", "1-0", "L", "5L", "W", "1#6", "mon", "?", ","]


@settings(max_examples=300, deadline=None)
@given(
    cron=st.text(max_size=40)
    | st.lists(st.sampled_from(CRON_PARTS), min_size=4, max_size=7).map(" ".join),
    zone=st.sampled_from(["UTC", "Europe/Paris"]),
)
def test_any_cron_text_parses_or_is_refused_with_a_typed_error(cron, zone):
    try:
        timing = Timing.parse(cron, 0, zone)
    except InvalidSchedule:
        return
    start = ms(datetime(2026, 10, 24, tzinfo=UTC))
    assert timing.next_after(start) > start  # what parses also ticks
