"""One script call for many jobs: how a batch is cut, and how its reply is shared out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .bounds import BATCH_BYTES, BATCH_MAX
from .connector import Call, translate_error
from .errors import ScriptError

T = TypeVar("T")


def in_batches(items: Sequence[T], size: Callable[[T], int]) -> list[list[T]]:
    """``items`` in order, cut into script calls of at most BATCH_MAX and ~BATCH_BYTES."""
    cut: list[list[T]] = []
    current: list[T] = []
    total = 0
    for item in items:
        n = size(item)
        if current and (len(current) == BATCH_MAX or total + n > BATCH_BYTES):
            cut.append(current)
            current, total = [], 0
        current.append(item)
        total += n
    if current:
        cut.append(current)
    return cut


def per_job(reply: Any, n: int, parse: Callable[[Any], Any]) -> list[Any]:
    """A batch script's reply as one value per job: its entry parsed, its typed error,
    or the whole call's error."""
    if isinstance(reply, Exception):
        return [reply] * n
    if not isinstance(reply, list) or len(reply) != n:
        return [ScriptError(f"expected {n} entries from a batch script, got {reply!r:.80}")] * n
    return [translate_error(r) if isinstance(r, Exception) else parse(r) for r in reply]


class Completing:
    """The script calls of one ``complete_many``, and how their replies map back to its
    items (one call per queue and BATCH_MAX jobs)."""

    def __init__(self, calls: list[Call], batches: list[list[int]], count: int) -> None:
        self.calls = calls
        self._batches = batches
        self._count = count

    def replies(self, replies: Sequence[Any]) -> list[int | Exception]:
        """One entry per item, in order: finished_at (µs) or the job's typed error; an
        error of a whole call (``replies`` holds it) is given to each of its jobs."""
        out: list[int | Exception] = [0] * self._count
        for batch, reply in zip(self._batches, replies):
            for n, value in zip(batch, per_job(reply, len(batch), int)):
                out[n] = value
        return out
