"""A schedule as the server stores it: its definition and its fire record, read
whatever was planted there (a number out of range reads as unreadable, never as a
crash of the reader: see ``schedules.stored_number``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InvalidSchedule
from .keyspace import validate_schedule_name
from .schedules import INT64_MAX, UnreadableSchedule, stored_number, stored_timing
from .timing import MAX_EVERY_MS, MAX_MS

# The most each stored number may be; any other field is a count (at most INT64_MAX).
HIGHEST = {"next_ms": MAX_MS, "last_tick": MAX_MS, "last_fired_at": MAX_MS * 1000,
           "grace_ms": MAX_EVERY_MS}  # fmt: skip


@dataclass(frozen=True, slots=True)
class StoredSchedule:
    """A schedule as the server holds it: definition and fire record (times: server clock).

    Its numbers are read by ``number`` (``UnreadableSchedule`` for a planted value) when
    planning a fire; a listing reads them with ``shown``, where such a value is None.
    """

    queue: str
    name: str
    score: str  # its next fire time (ms) as the server holds it; "inf" while paused or orphaned
    fields: dict[str, str]

    def number(self, name: str) -> int | None:
        """``next_ms`` (the score: None while paused or orphaned) or a field of the record
        as an integer; None when absent, ``UnreadableSchedule`` when it cannot be one."""
        value = self.score if name == "next_ms" else self.fields.get(name)
        if name == "next_ms" and value in ("inf", "+inf"):  # paused or orphaned
            return None
        try:
            return stored_number(value, HIGHEST.get(name, INT64_MAX))
        except UnreadableSchedule as exc:
            raise UnreadableSchedule(
                f"schedule {self.queue}/{self.name}: its stored {name} cannot be read: {exc}"
            ) from None

    def shown(self, name: str) -> int | None:
        """``number``, with None for a value that cannot be read (a listing shows the rest)."""
        try:
            return self.number(name)
        except UnreadableSchedule:
            return None

    def after(self, now_ms: int) -> int:
        """What its next tick is planned after: now, and its last tick fired."""
        return max(now_ms, self.number("last_tick") or 0)

    @property
    def next_ms(self) -> int | None:  # None while paused or orphaned (or unreadable)
        return self.shown("next_ms")

    @property
    def paused(self) -> bool:
        return self.fields.get("paused") == "1"

    @property
    def orphaned(self) -> bool:
        return self.fields.get("orphaned") == "1"

    @property
    def status(self) -> str:
        return "orphaned" if self.orphaned else "paused" if self.paused else "active"

    @property
    def task(self) -> str:
        return self.fields.get("task", "")

    @property
    def timezone(self) -> str:
        return self.fields.get("timezone", "UTC")

    @property
    def expression(self) -> str:
        """The cron expression, or ``every N unit``; '?' for a record that cannot be read."""
        try:
            return stored_timing(self.fields).describe()
        except InvalidSchedule:
            return "?"

    @property
    def last_tick(self) -> int | None:
        return self.shown("last_tick")

    @property
    def last_fired_at(self) -> int | None:
        return self.shown("last_fired_at")

    @property
    def last_job(self) -> str:
        return self.fields.get("last_job", "")

    def counter(self, name: str) -> int:
        """``fired``, ``missed`` or ``skipped`` so far (0 when it cannot be read)."""
        return self.shown(name) or 0

    @classmethod
    def of(cls, queue: str, name: str, score: Any, flat: Sequence[str]) -> StoredSchedule:
        return cls(queue, name, str(score), dict(zip(flat[::2], flat[1::2])))


def stored_records(queue: str, flat: Sequence[Any]) -> list[StoredSchedule]:
    """Triples (name, score, fields) as records; a planted ill-formed name is skipped."""
    found = []
    for name, score, fields in zip(flat[::3], flat[1::3], flat[2::3]):
        try:
            validate_schedule_name(name)
        except InvalidSchedule:
            continue
        found.append(StoredSchedule.of(queue, name, score, fields))
    return found
