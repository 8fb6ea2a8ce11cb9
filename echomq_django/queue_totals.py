"""The queues a project knows, and their counters, as the Prometheus endpoint, the
``echomq`` command and the admin read them: one definition of each total, so the
three never disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from . import conf
from .engine.errors import CorruptKey
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


def queue_stats(jobs: Jobs, queues: Iterable[str]) -> tuple[list[QueueStats], dict[str, str]]:
    """One consistent snapshot per queue (one read-only script call each), and the
    queues that cannot be read, with why (a place of another type): one broken queue
    does not hide the others."""
    stats, unreadable = [], {}
    for queue in queues:
        try:
            stats.append(jobs.stats(queue))
        except CorruptKey as exc:
            unreadable[queue] = str(exc)
    return stats, unreadable
