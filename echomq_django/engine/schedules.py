"""Periodic schedules: what one is, and when it fires (pure: no server, no clock).

A schedule names a job template (the payload and options an enqueue would store)
and a timing: a cron expression read in a time zone, or a fixed interval. Its
ticks are instants in Unix milliseconds; the tick a job was fired for is the
timestamp of its UUIDv7 id (``fire.lua`` derives the id from the schedule and
the tick, so a tick can only ever become one job).

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

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from functools import lru_cache
from itertools import islice
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from .errors import InvalidSchedule
from .jobs import NewJob
from .keyspace import validate_queue_name, validate_schedule_name

CATCH_UP = ("latest", "all", "none")
OVERLAP = ("skip", "allow")
CATCH_UP_MAX = 100  # ticks one fire may enqueue (catch_up "all"): one bounded script
COUNT_MAX = 1000  # missed cron ticks counted per fire (an interval's are counted exactly)
DEFAULT_GRACE_MS = 60_000
# How late a running reaper may fire the tick it planned: it sleeps at most 0.25 s
# (reaper.SCHEDULE_POLL_S) past it, then a read and the fire, a sweep at worst.
ON_TIME_MS = 1000
MIN_EVERY_MS = 1000
MAX_EVERY_MS = 366 * 24 * 3600 * 1000
EVERY_RULE = "'every' must be whole seconds (or a timedelta), from 1 second to 366 days"
MAX_MS = 253_402_300_799_999  # 9999-12-31 23:59:59.999 UTC: the last ms a date can hold
INT64_MAX = 2**63 - 1  # the most a counter the server increments can reach
# What every job a schedule fires stores, as ``NewJob`` names it: its job template
# (``includes/schedule.lua`` reads these fields of the record, in this order).
JOB_TEMPLATE = (
    "payload", "task", "priority", "max_attempts", "lease_ms", "result_ttl_ms", "dead_ttl_ms",
    "timeout_ms", "limits",
)  # fmt: skip
# The NewJob fields a tick gives each job (its id and due time: the tick's, now).
PER_TICK = ("id", "due_ms")
# The NewJob fields a schedule refuses (``Schedule`` says why): every other one is in
# JOB_TEMPLATE, so a fired job is the row an enqueue of its task stores.
REFUSED = ("run_after", "idempotency_key", "throttle_ms", "debounce_ms")
# The fields of the stored definition; the digest covers exactly these.
DEFINITION_FIELDS = (
    "cron", "every_ms", "timezone", "catch_up", "overlap", "grace_ms", *JOB_TEMPLATE,
)  # fmt: skip
TIMING_FIELDS = ("cron", "every_ms", "timezone")


class InvalidCron(InvalidSchedule):
    """A cron expression the parser refuses (or that never matches)."""


class UnknownTimeZone(InvalidSchedule):
    """A time zone name that is not in the IANA database of this machine."""


class UnreadableSchedule(InvalidSchedule):
    """A stored schedule record holding a value that cannot be read (planted or damaged)."""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A schedule as declared in code: its name and queue, its timing, its job template.

    ``job`` carries what every fired job stores (``JOB_TEMPLATE``: the payload, the task
    and every option an enqueue stores); its id and due time are the tick's. An option
    a periodic job cannot keep (``REFUSED``: a run_after, an idempotency key, throttle or
    debounce) is refused rather than dropped. ``overlap="skip"`` (the
    default) skips a tick while the job of the previous one is pending, scheduled or
    running, so a slow job or a stopped worker never piles up copies of one job.
    """

    name: str
    queue: str
    job: NewJob
    cron: str = ""
    every_ms: int = 0
    timezone: str = "UTC"
    catch_up: str = "latest"
    overlap: str = "skip"
    grace_ms: int = DEFAULT_GRACE_MS
    timing: Timing = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        validate_schedule_name(self.name)
        validate_queue_name(self.queue)
        object.__setattr__(self, "timing", Timing.parse(self.cron, self.every_ms, self.timezone))
        if self.catch_up not in CATCH_UP:
            raise InvalidSchedule(f"catch_up must be one of {', '.join(CATCH_UP)}")
        if self.overlap not in OVERLAP:
            raise InvalidSchedule(f"overlap must be one of {', '.join(OVERLAP)}")
        if self.catch_up == "all" and self.overlap == "skip":
            raise InvalidSchedule(
                "catch_up 'all' enqueues several ticks at once: it needs overlap 'allow'"
            )
        if isinstance(self.grace_ms, bool) or not isinstance(self.grace_ms, int):
            raise InvalidSchedule("grace must be a duration")
        if not 0 <= self.grace_ms <= MAX_EVERY_MS:
            raise InvalidSchedule("grace must be between 0 and 366 days")
        self.job.validate()
        for option in REFUSED:
            if getattr(self.job, option) != _NEW_JOB_DEFAULTS[option]:
                raise InvalidSchedule(
                    f"a schedule's job takes no {option}: each tick is one job already, "
                    "due at its tick (overlap 'skip' keeps one at a time)"
                )

    def definition(self) -> dict[str, str]:
        """The fields stored in the schedule's hash (what ``fire.lua`` reads)."""
        values = [self.cron, self.every_ms, self.timezone, self.catch_up, self.overlap,
                  self.grace_ms, *(getattr(self.job, name) for name in JOB_TEMPLATE)]  # fmt: skip
        return {name: str(value) for name, value in zip(DEFINITION_FIELDS, values, strict=True)}

    def timing_fields(self) -> dict[str, str]:
        """The part of ``definition`` that says when it fires (an edit of it is replanned)."""
        definition = self.definition()
        return {name: definition[name] for name in TIMING_FIELDS}

    @property
    def digest(self) -> str:
        """Names the definition: a schedule whose digest changed was edited in code."""
        text = json.dumps(self.definition(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


_NEW_JOB_DEFAULTS = {f.name: f.default for f in fields(NewJob)}


def stored_timing(fields: dict[str, str]) -> Timing:
    """The timing of a stored definition (``InvalidSchedule`` if it cannot be read)."""
    try:
        every = int(fields.get("every_ms") or 0)
    except ValueError:
        raise InvalidSchedule(
            f"stored every_ms is not an integer: {fields['every_ms']!r:.40}"
        ) from None
    return Timing.parse(fields.get("cron") or "", every, fields.get("timezone") or "UTC")


def stored_number(value: object, high: int = INT64_MAX) -> int | None:
    """An integer a schedule's record stores (a time, a score, a count), or None when absent.

    The one reader of a stored number: ``UnreadableSchedule`` for anything that is
    not a whole number from 0 to ``high`` (text, a fraction, -inf, 10**400, a time
    past year 9999), so no planted value reaches a date or a float conversion.
    """
    if value is None or value == "":
        return None
    text = str(value)
    try:
        number = int(text)
    except ValueError:
        try:  # a score the server formats as a float: 1e+20
            as_float = float(text)
        except ValueError:
            as_float = math.nan
        number = int(as_float) if as_float.is_integer() else -1
    if not 0 <= number <= high:
        raise UnreadableSchedule(f"{text[:40]!r} is not a whole number from 0 to {high}")
    return number
