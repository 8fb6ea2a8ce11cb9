"""When a periodic schedule fires: its timing and the plan of one fire (pure: no
server, no clock). What a schedule is, and how it is stored: ``schedules.py``.

Time zones and daylight saving time follow Debian cron, as the ``cronsim``
parser implements it:

- An expression with a fixed minute and hour (``30 2 * * *``) is read on the
  wall clock. A wall time that does not exist on a spring-forward day fires once,
  at the first minute that exists after it (02:30 -> 03:00); a wall time that
  happens twice on an autumn fall-back day fires once, at its first occurrence.
  A six-field one (seconds first) with a fixed second, minute and hour
  (``0 30 2 * * *``) too: cronsim keeps that rule to five fields, ``walk`` extends it.
- An expression with ``*`` in the second, minute or hour field (``*/15 * * * *``)
  is read on the absolute clock: every matching instant fires, so the repeated
  hour of a fall-back night has its quarter hours twice and the skipped hour of a
  spring-forward night has none.
- ``every`` intervals ignore the zone: ticks are the multiples of the interval
  since the Unix epoch (every 5 minutes is :00, :05, ... UTC), the same for
  every scheduler and across restarts.

Catch-up: when the ticks from the stored next fire time up to now are due at
once (no scheduler ran for a while), ``plan`` picks what to fire:
``latest`` (default) the most recent due tick, once; ``all`` every due tick,
oldest first, at most ``CATCH_UP_MAX``; ``none`` only a tick that is on time:
late by at most ``grace_ms``, or the very tick the last fire planned, fired within
``ON_TIME_MS`` of it (a running reaper fires a tick a few ms after it, whatever
``grace_ms`` is). The ticks not fired are counted as missed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from itertools import islice
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from .errors import InvalidSchedule

CATCH_UP_MAX = 100  # ticks one fire may enqueue (catch_up "all"): one bounded script
COUNT_MAX = 1000  # missed cron ticks counted per fire (an interval's are counted exactly)
# How late a running reaper may fire the tick it planned: it sleeps at most 0.25 s
# (reaper.SCHEDULE_POLL_S) past it, then a read and the fire, a sweep at worst.
ON_TIME_MS = 1000
MIN_EVERY_MS = 1000
MAX_EVERY_MS = 366 * 24 * 3600 * 1000
EVERY_RULE = "'every' must be whole seconds (or a timedelta), from 1 second to 366 days"
MAX_MS = 253_402_300_799_999  # 9999-12-31 23:59:59.999 UTC: the last ms a date can hold


class InvalidCron(InvalidSchedule):
    """A cron expression the parser refuses (or that never matches)."""


class UnknownTimeZone(InvalidSchedule):
    """A time zone name that is not in the IANA database of this machine."""


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``, or ``UnknownTimeZone`` (never a path: ZoneInfo refuses those)."""
    if not isinstance(name, str) or not name or len(name) > 100:
        raise UnknownTimeZone(f"unknown time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise UnknownTimeZone(
            f"unknown time zone {name!r} (expected e.g. 'Europe/Paris')"
        ) from None


def _check_ms(t_ms: int) -> int:
    """``t_ms`` if it is a time a date can hold (1970 to 9999), else ``InvalidSchedule``."""
    if not 0 <= t_ms <= MAX_MS:
        raise InvalidSchedule(f"{str(t_ms)[:40]} ms is not a time from 1970 to 9999")
    return t_ms


def _utc_ms(moment: datetime) -> int:
    return int(moment.astimezone(UTC).timestamp()) * 1000


def walk(cron: str, start: datetime, *, reverse: bool = False) -> CronSim:
    """cronsim's walk of ``cron`` from ``start``, a fixed time of day on the wall clock.

    cronsim reads a five-field expression with a fixed minute and hour on the naive
    wall clock (Debian cron's DST rule), a six-field one always on the absolute clock:
    ``0 30 2 * * *`` did not run on a spring-forward day and ran twice on a fall-back
    day. Written with seconds, the same time of day gets the same rule here, set up as
    cronsim's constructor sets it up for five fields."""
    sim = CronSim(cron, start, reverse=reverse)
    parts = cron.split()
    if (
        len(parts) == 6
        and sim.fixup_tz is None
        and sim.dt.tzinfo not in (None, UTC)
        and not any(part.startswith("*") for part in parts[:3])
    ):
        sim.fixup_tz = sim.dt.tzinfo
        sim.dt = sim.dt.replace(tzinfo=None)
    return sim


@dataclass(frozen=True, slots=True)
class Timing:
    """When a schedule fires: ``cron`` in ``timezone``, or every ``every_ms``."""

    cron: str = ""
    every_ms: int = 0
    timezone: str = "UTC"

    @classmethod
    def parse(cls, cron: str, every_ms: int, timezone: str) -> Timing:
        """A checked timing. The types are checked before the cache (an unhashable
        value would fail it with a TypeError that names no field)."""
        if not isinstance(cron, str):
            raise InvalidCron(f"a cron expression is text, not {type(cron).__name__}")
        if isinstance(every_ms, bool) or not isinstance(every_ms, int):
            raise InvalidSchedule(f"{EVERY_RULE}, not {every_ms!r:.40}")
        if not isinstance(timezone, str):
            raise UnknownTimeZone(f"a time zone is a name, not {type(timezone).__name__}")
        return cls._parse(cron, every_ms, timezone)

    @classmethod
    @lru_cache(maxsize=256)
    def _parse(cls, cron: str, every_ms: int, timezone: str) -> Timing:
        """``parse``, remembered: reapers plan with it on every fire."""
        if bool(cron) == bool(every_ms):
            raise InvalidSchedule("give exactly one of 'cron' and 'every'")
        tz = zone(timezone)
        if every_ms:
            if not MIN_EVERY_MS <= every_ms <= MAX_EVERY_MS or every_ms % 1000:
                raise InvalidSchedule(EVERY_RULE)
            return cls(every_ms=every_ms, timezone=timezone)
        if len(cron) > 200 or not (cron.isascii() and cron.isprintable()):
            raise InvalidCron(f"bad cron expression {cron!r:.80}")
        try:
            next(walk(cron, datetime.now(tz)))
        except (CronSimError, StopIteration, ValueError, LookupError, OverflowError) as exc:
            raise InvalidCron(
                f"bad cron expression {cron!r}: {str(exc) or 'it never matches'}"
            ) from None
        return cls(cron=cron, timezone=timezone)

    def next_after(self, t_ms: int) -> int:
        """The first tick strictly after ``t_ms`` (``InvalidSchedule`` past what a date holds).

        The one definition of a timing's ticks: ``ticks`` chains it, and ``due`` and
        ``count`` take their ticks from that chain (-1: the walk that may find tick 0)."""
        _check_ms(max(t_ms, 0))
        if self.every_ms:
            return _check_ms((t_ms // self.every_ms + 1) * self.every_ms)
        tz = zone(self.timezone)
        try:
            # A minute back: a wall-clock tick a spring-forward moved to the first minute
            # that exists keeps its seconds (03:00:10), and a walk from within those
            # seconds would pass it by on the wall clock.
            start = datetime.fromtimestamp(t_ms / 1000 - 60, tz)
            for moment in walk(self.cron, start):
                tick = _utc_ms(moment)
                if tick > t_ms:  # a wall-clock tick of a fall-back night can lie behind `start`
                    return _check_ms(tick)
        except (ValueError, OverflowError, OSError):  # past year 9999 (in the zone)
            pass
        raise InvalidCron(f"cron expression {self.cron!r} has no tick after {t_ms} a date holds")

    def ticks(self, after_ms: int, until_ms: int) -> Iterator[int]:
        """The ticks in (after_ms, until_ms], oldest first: ``next_after`` chained."""
        tick = after_ms
        while True:
            try:
                tick = self.next_after(tick)
            except InvalidSchedule:  # no tick left that a date holds
                return
            if tick > until_ms:
                return
            yield tick

    def due(self, now_ms: int, since_ms: int, limit: int) -> list[int]:
        """Ticks in [since_ms, now_ms], newest first, at most ``limit`` of them.

        The newest ticks of the forward walk (``ticks``), so a fire and the next fire
        time agree on every tick, also in a fall-back night's repeated hour. The walk
        starts where the backward walk puts the oldest of them (a guess, cheap even for
        a seconds-level cron after a month), and reaches back further while it finds
        fewer than ``limit`` ticks after it."""
        _check_ms(now_ms)
        if self.every_ms:
            latest = now_ms // self.every_ms * self.every_ms
            return list(range(latest, since_ms - 1, -self.every_ms)[:limit])
        start = self._reach_back(now_ms, since_ms, limit)
        while True:
            found = list(self.ticks(max(start, since_ms - 1), now_ms))
            if len(found) >= limit or start < since_ms:
                return found[: -limit - 1 : -1]
            start = now_ms - 2 * (now_ms - start)

    def _reach_back(self, now_ms: int, since_ms: int, limit: int) -> int:
        """Just before the oldest of the ``limit`` ticks up to ``now_ms``, by cronsim's
        backward walk: only a guess of where ``due`` looks, as from a fall-back night's
        repeated hour that walk skips a day (since_ms - 1 when it reaches ``since_ms``)."""
        tz = zone(self.timezone)
        seen = 0
        try:
            # now + 1 ms: cronsim's reverse walk starts at the whole second at or before it.
            start = datetime.fromtimestamp((now_ms + 1) / 1000, tz)
            for moment in walk(self.cron, start, reverse=True):
                tick = _utc_ms(moment)
                if tick < since_ms:
                    break
                seen += tick <= now_ms
                if seen >= limit:
                    return tick - 1
        except (ValueError, OverflowError, OSError):  # walked back past year 1 (in the zone)
            pass
        return since_ms - 1

    def count(self, now_ms: int, since_ms: int) -> int:
        """How many ticks lie in [since_ms, now_ms] (cron: at most ``COUNT_MAX``)."""
        if self.every_ms:
            first = -(-since_ms // self.every_ms)
            return max(0, now_ms // self.every_ms - first + 1)
        return sum(1 for _ in islice(self.ticks(since_ms - 1, now_ms), COUNT_MAX))

    def describe(self) -> str:
        if self.cron:
            return self.cron
        seconds = self.every_ms // 1000
        for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
            if seconds % size == 0:
                return f"every {seconds // size} {unit}"
        return f"every {seconds} s"


@dataclass(frozen=True, slots=True)
class Plan:
    """What one fire does: the ticks to enqueue (oldest first), the ticks it gives up."""

    ticks: list[int]
    missed: int
    next_ms: int


def plan(timing: Timing, catch_up: str, grace_ms: int, next_ms: int, now_ms: int) -> Plan:
    """The fire due at ``now_ms`` for a schedule whose next fire time is ``next_ms``."""
    if next_ms > now_ms:
        return Plan([], 0, next_ms)
    limit = CATCH_UP_MAX if catch_up == "all" else 1
    due = timing.due(now_ms, next_ms, limit)
    if catch_up == "none" and due and not on_time(due[0], grace_ms, next_ms, now_ms):
        due = []
    total = max(timing.count(now_ms, next_ms), len(due))
    return Plan(sorted(due), total - len(due), timing.next_after(now_ms))


def on_time(tick: int, grace_ms: int, next_ms: int, now_ms: int) -> bool:
    """Whether ``catch_up: "none"`` fires ``tick`` at ``now_ms``: late by at most
    ``grace_ms``, or the tick the last fire planned (``next_ms``) and fired as a running
    reaper fires it. A grace below a reaper's own lateness (0 passes the check) dropped
    every tick as missed while the reaper ran; ticks that came due after the planned
    one were due while no reaper fired them, and only ``grace_ms`` lets them through."""
    late = now_ms - tick
    return late <= grace_ms or (tick == next_ms and late <= ON_TIME_MS)
