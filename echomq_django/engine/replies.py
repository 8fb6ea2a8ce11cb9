"""What the engine's calls answer, and how a script's reply becomes one of these."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import CorruptRow
from .rows import AT, Job


@dataclass(frozen=True, slots=True)
class Claimed:
    """A job handed to a worker, or the row that could not be read (``job`` None)."""

    queue: str
    id: str
    token: int
    job: Job | None
    corrupt: str = ""  # why the row could not be read

    @classmethod
    def from_values(cls, queue: str, values: Sequence[str | None]) -> Claimed:
        """One job of the claim script's reply (its ``ROW_FIELDS`` values)."""
        token = int(values[AT["attempts"]] or 0)  # the script's HINCRBY made it an integer
        try:
            return cls(queue, values[0] or "", token, Job.from_values(queue, values))
        except CorruptRow as exc:
            return cls(queue, values[0] or "", token, None, str(exc))


@dataclass(frozen=True, slots=True)
class Claim:
    now_ms: int  # the server's clock at the claim
    next_due_ms: int | None  # the earliest scheduled job, or held-back gate, still waiting
    jobs: list[Claimed]

    @classmethod
    def from_reply(cls, queue: str, reply: Sequence[Any]) -> Claim:
        next_due = int(reply[1])
        jobs = [Claimed.from_values(queue, r) for r in reply[2:]]
        return cls(int(reply[0]), None if next_due < 0 else next_due, jobs)


@dataclass(frozen=True, slots=True)
class RetryOutcome:
    state: str  # 'pending', 'scheduled', 'dead', or 'cancelled' (dead: an operator's cancel)
    due_ms: int


@dataclass(frozen=True, slots=True)
class Sweep:
    """The outcome of a bounded sweep loop (reap, promote, trim, retry_dead)."""

    moved: int = 0
    dead: int = 0
    dangling: int = 0
    calls: int = 0


Progress = Callable[[Sweep], None]
"""Called after each bounded call of a sweep loop with the totals so far (a CLI's progress bar)."""


@dataclass(frozen=True, slots=True)
class QueueStats:
    queue: str
    now_ms: int
    counts: dict[str, int]
    metrics: dict[str, int]


@dataclass(frozen=True, slots=True)
class PageEntry:
    id: str
    score: float
    fields: dict[str, str | None]


@dataclass(frozen=True, slots=True)
class Page:
    total: int
    entries: list[PageEntry]


def counter(value: str | None) -> int | None:
    """A counter as the scripts write it (an integer), or None for planted text."""
    if value is None or not value.isascii():
        return None
    try:
        return int(value)
    except ValueError:
        return None


def pairs(flat: Sequence[Any]) -> dict[str, Any]:
    """A flat [field, value, ...] reply (HGETALL inside a script) as a dict."""
    return dict(zip(flat[::2], flat[1::2]))
