"""The queues a project knows, and their counters, as the Prometheus endpoint, the
``echomq`` command and the admin read them: one definition of each total, so the
three never disagree.

Each of them reads queue by queue through ``per_queue``: a key of one queue the
engine cannot use (a place, its limits, a minute of its throughput of another type)
makes that queue unreadable, and the others are read as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from . import conf
from .engine.errors import EchoMQError, InvalidURL, ServerUnavailable
from .engine.jobs import Jobs, QueueStats
from .engine.keyspace import validate_queue_name

# (metric suffix, HELP text, fields of the queue's metrics hash that add up to it; a
# field written "-name" is taken away: an operator's cancel moves a job to dead, and
# counts as 'dead' there, but no attempt of it failed)
COUNTERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("enqueued", "Jobs enqueued.", ("enqueued",)),
    ("completed", "Jobs completed.", ("completed",)),
    (
        "failed",
        "Failed attempts: retried, or moved to dead (operator cancels not included).",
        ("retried", "dead", "-cancelled"),
    ),
    ("retried", "Failed attempts that were retried.", ("retried",)),
    ("reaped", "Expired leases taken back by a reaper.", ("reaped", "reaped_dead")),
    ("dead", "Jobs moved to dead (cancelled ones too).", ("dead",)),
    ("cancelled", "Jobs an operator cancelled (moved to dead).", ("cancelled",)),
)


def counter_total(metrics: dict[str, int], fields: Sequence[str]) -> int:
    """One COUNTERS entry's value from a queue's metrics hash."""
    return sum(-metrics.get(f[1:], 0) if f.startswith("-") else metrics.get(f, 0) for f in fields)


def event_totals(stats: QueueStats) -> dict[str, int]:
    """Every COUNTERS entry of one queue, by suffix (the ``stats`` table's second part)."""
    return {suffix: counter_total(stats.metrics, fields) for suffix, _, fields in COUNTERS}


def known_queues(jobs: Jobs) -> list[str]:
    """The queues in the registry (every queue ever enqueued to) and in ECHOMQ QUEUES.

    Invalid names in the settings are skipped here: the system checks report them.
    """
    names = set(jobs.queues())
    for name in conf.get_settings().queues:
        try:
            names.add(validate_queue_name(name))
        except ValueError:
            continue
    return sorted(names)


T = TypeVar("T")


def per_queue(
    queues: Iterable[str], read: Callable[[str], T]
) -> tuple[dict[str, T], dict[str, str]]:
    """``read(queue)`` of each queue, and the queues it cannot read with why (data the
    engine cannot use: a key of another type, a corrupt place): one broken queue does
    not hide the others. A lost server is no data error: it raises."""
    found, unreadable = {}, {}
    for queue in queues:
        try:
            found[queue] = read(queue)
        except (ServerUnavailable, InvalidURL):
            raise
        except EchoMQError as exc:
            unreadable[queue] = str(exc)
    return found, unreadable


def readable(read: Callable[[], T]) -> tuple[T | None, str]:
    """(``read()``, "") or (None, why): ``per_queue`` for one read of a page (a queue's
    limits on its list) or of a key of no queue (the workers' registry)."""
    found, unreadable = per_queue([""], lambda _: read())
    return found.get(""), unreadable.get("", "")


def queue_stats(jobs: Jobs, queues: Iterable[str]) -> tuple[list[QueueStats], dict[str, str]]:
    """One consistent snapshot per queue (one read-only script call each), and the
    queues that cannot be read, with why (a place of another type)."""
    stats, unreadable = per_queue(queues, jobs.stats)
    return list(stats.values()), unreadable
