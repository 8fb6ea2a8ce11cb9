"""Jobs of one task within a place, and how many of each task a place holds.

A place's sorted set is keyed by time or priority, not by task: finding one
task's jobs means reading the set. So it is read in pages (``Jobs.page``, one
bounded script call each) and at most ``SCAN_MAX`` jobs deep; a result drawn
from part of a long set says so (``complete`` False). The admin's task filter
and per-task counts and ``echomq jobs --task`` share this.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .engine.jobs import PAGE_MAX, Jobs, PageEntry

SCAN_MAX = 10_000  # jobs read, at most, to filter a place by task
COUNT_MAX = 2_000  # jobs read, at most, to count a place's jobs per task


@dataclass(frozen=True)
class Matches:
    entries: list[PageEntry]  # the requested slice of the matching jobs
    total: int  # matching jobs among those read
    complete: bool  # the whole place was read (else: the first SCAN_MAX)


def scan(
    jobs: Jobs, queue: str, state: str, *, newest_first: bool, fields: Sequence[str], limit: int
) -> Iterator[PageEntry]:
    """The place's entries in its order, read PAGE_MAX at a time, at most ``limit``."""
    offset = 0
    while offset < limit:
        count = min(PAGE_MAX, limit - offset)
        page = jobs.page(
            queue, state, offset=offset, count=count, newest_first=newest_first, fields=fields
        )
        yield from page.entries
        offset += len(page.entries)
        if len(page.entries) < count or offset >= page.total:
            return


def of_task(
    jobs: Jobs,
    queue: str,
    state: str,
    task: str,
    *,
    offset: int,
    count: int,
    newest_first: bool,
    fields: Sequence[str],
) -> Matches:
    """Jobs ``offset`` to ``offset + count`` of those whose task is ``task``."""
    wanted = ("task", *(f for f in fields if f != "task"))
    matching, read = [], 0
    for entry in scan(jobs, queue, state, newest_first=newest_first, fields=wanted, limit=SCAN_MAX):
        read += 1
        if entry.fields.get("task") == task:
            matching.append(entry)
    complete = read < SCAN_MAX or jobs.stats(queue).counts.get(state, 0) <= SCAN_MAX
    return Matches(matching[offset : offset + count], len(matching), complete)


def counts(jobs: Jobs, queue: str, state: str, limit: int = COUNT_MAX) -> tuple[Counter[str], int]:
    """(jobs per task among the first ``limit`` of the place, how many were read)."""
    tasks: Counter[str] = Counter()
    read = 0
    for entry in scan(jobs, queue, state, newest_first=False, fields=("task",), limit=limit):
        tasks[entry.fields.get("task") or ""] += 1
        read += 1
    return tasks, read
