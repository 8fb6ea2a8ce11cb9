"""Catch-up across DST: ``plan`` fires or counts exactly the ticks the forward walk yields.

For each zone's two transitions of 2026, each expression hitting the skipped or the
repeated hour, each next fire time near the transition and each lateness, the ticks
fired plus the ticks counted missed are the ticks ``next_after`` walks through in
[next fire time, now]: none twice, none dropped (the README's "nothing is missed
silently"), and the next fire time is the first tick after now.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from echomq_django.engine.timing import CATCH_UP_MAX, Timing, plan

GRACE_MS = 60_000
LATENESS_MS = range(0, 181 * 60_000, 7 * 60_000)  # 0 to 3 h late, by 7 min
# Wall-clock times in the repeated and skipped hours, the absolute clock through them,
# seconds first, and a range of hours.
EXPRESSIONS = {
    "America/New_York": ["59 1 * * *", "30 1 * * *", "30 2 * * *", "*/20 * * * *", "15 1-3 * * *"],
    "Europe/Paris": ["30 2 * * *", "0 3 * * *", "0,30 * * * *", "0 */20 2 * * *", "15 1-3 * * *"],
    "Australia/Lord_Howe": ["45 1 * * *", "15 2 * * *", "*/15 * * * *", "50 1-2 * * *"],
    "UTC": ["30 2 * * *", "*/20 * * * *"],
}
CASES = [(zone, cron) for zone, crons in EXPRESSIONS.items() for cron in crons]


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def transitions(zone: str, year: int = 2026) -> list[int]:
    """The instants (ms, to the hour) the zone's UTC offset changes in ``year`` (noon for UTC)."""
    tz, found = ZoneInfo(zone), []
    at = datetime(year, 1, 1, tzinfo=UTC)
    while at.year == year:
        later = at + timedelta(minutes=30)
        if at.astimezone(tz).utcoffset() != later.astimezone(tz).utcoffset():
            found.append(ms(later))
        at = later
    return found or [
        ms(datetime(year, 3, 29, 12, tzinfo=UTC)),
        ms(datetime(year, 10, 25, tzinfo=UTC)),
    ]


def walk(timing: Timing, after: int, until: int) -> list[int]:
    """The forward walk: ``next_after`` chained, the ticks in (after, until]."""
    out, tick = [], timing.next_after(after)
    while tick <= until:
        out.append(tick)
        tick = timing.next_after(tick)
    return out


def test_the_zones_have_two_transitions_a_year():
    assert [len(transitions(zone)) for zone in EXPRESSIONS if zone != "UTC"] == [2, 2, 2]


@pytest.mark.parametrize(("zone", "cron"), CASES)
def test_a_late_fire_fires_or_counts_every_tick_of_the_forward_walk(zone, cron):
    timing = Timing.parse(cron, 0, zone)
    for change in transitions(zone):
        window = walk(timing, change - 27 * 3_600_000, change + 3 * 3_600_000)
        for next_ms in window[:: max(1, len(window) // 6)] + window[-3:]:
            for late in LATENESS_MS:
                now = next_ms + late
                expected = walk(timing, next_ms - 1, now)
                assert expected[0] == next_ms
                for catch_up in ("latest", "all", "none"):
                    chosen = plan(timing, catch_up, GRACE_MS, next_ms, now)
                    where = f"{cron} {zone} {catch_up} next={next_ms} now={now}"
                    assert chosen.next_ms == timing.next_after(now), where
                    assert set(chosen.ticks) <= set(expected), where
                    assert len(set(chosen.ticks)) == len(chosen.ticks), where
                    assert len(chosen.ticks) + chosen.missed == len(expected), where
                    if catch_up == "all":
                        assert chosen.ticks == expected[-CATCH_UP_MAX:], where
                    elif catch_up == "latest" or now - expected[-1] <= GRACE_MS:
                        assert chosen.ticks == expected[-1:], where
                    else:
                        assert chosen.ticks == [], where


@pytest.mark.parametrize(
    ("cron", "zone", "late_min"),
    [("59 1 * * *", "America/New_York", 5), ("30 1 * * *", "America/New_York", 35)]
    + [("30 2 * * *", "Europe/Paris", late) for late in (30, 40, 55)],
)
def test_a_tick_of_the_repeated_hour_planned_late_fires_once(cron, zone, late_min):
    """The review's cases: the first 01:59 EDT, asked from 02:04 EDT = 01:04 EST."""
    timing = Timing.parse(cron, 0, zone)
    tick = timing.next_after(ms(datetime(2026, 10, 24, 12, tzinfo=UTC)))
    if zone == "America/New_York":
        tick = timing.next_after(ms(datetime(2026, 10, 31, 12, tzinfo=UTC)))
    chosen = plan(timing, "latest", GRACE_MS, tick, tick + late_min * 60_000)
    assert (chosen.ticks, chosen.missed) == ([tick], 0)
    assert chosen.next_ms == timing.next_after(tick)


def test_a_seconds_cron_after_a_month_away_is_planned_cheaply():
    timing = Timing.parse("* * * * * *", 0, "Europe/Paris")
    now = ms(datetime(2026, 11, 20, tzinfo=UTC))
    since = now - 30 * 86_400_000
    started = datetime.now()
    chosen = plan(timing, "all", GRACE_MS, since, now)
    assert chosen.ticks == list(range(now - (CATCH_UP_MAX - 1) * 1000, now + 1, 1000))
    assert chosen.missed == 1000 - CATCH_UP_MAX  # counted up to COUNT_MAX
    assert datetime.now() - started < timedelta(seconds=2)
