"""What the engine's calls answer, and how a script's reply becomes one of these."""

from __future__ import annotations

import re
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
    """The outcome of a bounded sweep loop (reap, promote, trim, purge, retry_dead)."""

    moved: int = 0
    dead: int = 0
    dangling: int = 0
    calls: int = 0
    refused: int = 0  # retry_dead: dead jobs left dead (a live job holds their key)


_SCORE = re.compile(r"-?[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?")
_COUNT = re.compile(r"[0-9]{1,18}")


@dataclass(frozen=True, slots=True)
class Bound:
    """A finished set (completed or dead) as an operator's action on all of it found it
    (bound.lua): ``count`` jobs, none scored above ``max_score``, none finished after
    ``at_us`` (the server's clock). ``purge`` and ``retry_dead`` act on those jobs only:
    the ones that finish meanwhile are left for the next command."""

    state: str
    count: int
    max_score: str  # the highest score as the server wrote it ('' : the set was empty)
    at_us: int

    @classmethod
    def from_reply(cls, state: str, reply: Sequence[Any]) -> Bound:
        return cls(state, int(reply[0]), str(reply[1] or ""), int(reply[2]))

    def token(self) -> str:
        """The bound as one string (a form's hidden field): ``parse`` reads it back."""
        return f"{self.count}:{self.max_score}:{self.at_us}"

    @classmethod
    def parse(cls, state: str, text: str) -> Bound:
        """The bound ``token`` wrote; ValueError for anything else."""
        count, max_score, at_us = text.split(":")
        if not (_COUNT.fullmatch(count) and _COUNT.fullmatch(at_us)) or len(text) > 80:
            raise ValueError(f"not a bound: {text!r}")
        if (max_score == "") != (count == "0") or (max_score and not _SCORE.fullmatch(max_score)):
            raise ValueError(f"not a bound: {text!r}")
        return cls(state, int(count), max_score, int(at_us))


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


COUNTER_MAX = 2**63 - 1  # the most a counter the server increments can hold


def counter(value: str | None) -> int | None:
    """A counter as the scripts write it (HINCRBY: an integer from 0 to 2**63 - 1), or
    None for planted text or a number no counter reaches: a 400-digit one overflowed the
    chart's float math and broke the dashboard, and no scrape parses it."""
    if value is None or not value.isascii():
        return None
    try:
        number = int(value)
    except ValueError:
        return None
    return number if 0 <= number <= COUNTER_MAX else None


def pairs(flat: Sequence[Any]) -> dict[str, Any]:
    """A flat [field, value, ...] reply (HGETALL inside a script) as a dict."""
    return dict(zip(flat[::2], flat[1::2]))
