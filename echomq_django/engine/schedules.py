"""Periodic schedules: what one is, and when it fires (pure: no server, no clock).

A schedule names a job template (the payload and options an enqueue would store)
and a timing: a cron expression read in a time zone, or a fixed interval. Its
ticks are instants in Unix milliseconds; the tick a job was fired for is the
timestamp of its UUIDv7 id (``fire.lua`` derives the id from the schedule and
the tick, so a tick can only ever become one job).

When a schedule fires (its timing, time zones and daylight saving time, catch-up):
:mod:`echomq_django.engine.timing`.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, fields

from .errors import InvalidSchedule
from .jobs import NewJob
from .keyspace import validate_queue_name, validate_schedule_name
from .timing import MAX_EVERY_MS, Timing

CATCH_UP = ("latest", "all", "none")
OVERLAP = ("skip", "allow")
DEFAULT_GRACE_MS = 60_000
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


class UnreadableSchedule(InvalidSchedule):
    """A stored schedule record holding a value that cannot be read (planted or damaged)."""


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
