"""Template filters of the EchoMQ admin pages."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from django import template

from ..engine.times import showable

register = template.Library()

_UNITS = ((86_400, "d"), (3_600, "h"), (60, "min"), (1, "s"))


@register.filter
def ago(moment: datetime | None, now: datetime) -> str:
    """Compact relative time: "12 s ago", "in 4 min", "3 h 12 min ago", "just now".

    Django's ``timesince`` stops at minutes ("0 minutes"), too coarse for a queue
    whose jobs live for seconds.
    """
    if moment is None:
        return ""
    seconds = round((now - moment).total_seconds())
    if abs(seconds) < 1:
        return "just now"
    left, parts = abs(seconds), []
    for size, unit in _UNITS:
        if left >= size:
            parts.append(f"{left // size} {unit}")
            left %= size
        if len(parts) == 2 or (parts and size < 60):
            break
    text = " ".join(parts)
    return f"{text} ago" if seconds > 0 else f"in {text}"


@register.filter
def last_line(text: str) -> str:
    """The last non-blank line of a traceback: the exception and its message."""
    lines = [line for line in str(text or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


@register.filter
def tally(items: Iterable[str]) -> list[tuple[str, int]]:
    """Each distinct item once, first seen first, with how often it came: a job's workers
    are one per attempt, and three attempts on one worker read as that worker ×3."""
    return list(Counter(items).items())


@register.filter
def iso_moment(text: str) -> datetime | None:
    """A stored ISO 8601 text (a job's ``run_after`` as Django gave it) as a datetime, so
    the page shows it in the format of every other time; None if it is not one, or if
    it cannot be shown in the page's zone (year 1 at +14:00: the page shows the text)."""
    try:
        return showable(datetime.fromisoformat(str(text)))
    except ValueError:
        return None
