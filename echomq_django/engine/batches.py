"""One script call for many jobs: how a batch is cut, and how its reply is shared out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .bounds import BATCH_BYTES, BATCH_MAX
from .connector import translate_error
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
