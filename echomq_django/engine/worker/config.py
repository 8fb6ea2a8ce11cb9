"""What a worker is asked to do, checked once: the one validator of a worker's options.

A thread-mode ``Worker`` and a ``Supervisor`` take the same options; the supervisor
hands them on to its child workers as JSON (``to_json`` / ``from_json``), each
child getting its share of the slots (``for_child``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..jobs import DEFAULT_CRASH_BUDGET, DEFAULT_LEASE_MS
from ..keyspace import QueueKeys
from ..retry_policy import RetryPolicy
from .shares import Share, plan

MAX_LEASE_MS = 7 * 24 * 3600 * 1000  # what Jobs.claim accepts

# The GIL switch interval of a process that is the worker's own (``runworker``, a
# supervised child): the heartbeat and the idle wait block on the server, and when a
# reply arrives they need the GIL from an executor running tasks, which lets go of it
# only every switch interval (5 ms by default), so a claim's reply waited up to that
# long to be read. At 1 ms a worker ran 7% more short jobs per second (in-process
# A/B); four CPU-bound threads ran no slower.
SWITCH_INTERVAL_S = 0.001


@dataclass(frozen=True)
class WorkerConfig:
    """A worker's options. ``sizes`` reserves slots for queues: ``{"default": 4,
    "slow": 1}`` runs at most 4 jobs of ``default`` and 1 of ``slow`` at once, and
    neither ever waits for the other's slots; unsized queues share the slots left."""

    queues: tuple[str, ...]
    concurrency: int = 1
    lease_ms: int = DEFAULT_LEASE_MS
    burst: bool = False
    max_jobs: int | None = None
    grace_s: float = 30.0
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    idle_block_s: float = 5.0
    registry_interval_s: float = 5.0
    time_limit_s: float = 0.0
    crash_budget: int = DEFAULT_CRASH_BUDGET
    sizes: Mapping[str, int] = field(default_factory=dict)
    processes: int = 0  # child worker processes under a supervisor (0: this one runs tasks)

    def __post_init__(self) -> None:
        if not self.queues:
            raise ValueError("a worker needs at least one queue")
        queues = tuple(QueueKeys.of(q).queue for q in dict.fromkeys(self.queues))
        object.__setattr__(self, "queues", queues)
        object.__setattr__(self, "sizes", dict(self.sizes))
        _check_positive("concurrency", self.concurrency)
        _check_positive("lease_ms", self.lease_ms)
        if self.lease_ms > MAX_LEASE_MS:
            raise ValueError(
                f"lease_ms must be at most {MAX_LEASE_MS} (7 days), not {self.lease_ms}"
            )
        if self.max_jobs is not None:
            _check_positive("max_jobs", self.max_jobs)
        if not (self.grace_s >= 0 and self.idle_block_s > 0 and self.registry_interval_s > 0):
            raise ValueError("grace_s must be >= 0, idle_block_s and registry_interval_s > 0")
        if not self.time_limit_s >= 0 or math.isinf(self.time_limit_s):
            raise ValueError(f"time_limit_s must be >= 0 (0: none), not {self.time_limit_s!r}")
        _check_positive("crash_budget", self.crash_budget)
        if isinstance(self.processes, bool) or not isinstance(self.processes, int):
            raise ValueError(f"processes must be an integer >= 0, not {self.processes!r}")
        if self.processes < 0:
            raise ValueError(f"processes must be an integer >= 0, not {self.processes!r}")
        for child in range(self.processes):  # the sizes must fit the slots
            self.for_child(child, None).shares()
        if not self.processes:
            self.shares()

    @property
    def slots(self) -> int:
        """Jobs run at once by the whole worker."""
        return self.concurrency * max(self.processes, 1)

    def shares(self) -> list[Share]:
        return plan(self.queues, self.sizes, self.concurrency)

    def time_limit_ms(self, own_ms: int) -> int:
        """A run's limit (0: none): the job's own, capped by the worker's."""
        cap = round(self.time_limit_s * 1000)
        return min(own_ms, cap) if own_ms and cap else own_ms or cap

    def for_child(self, number: int, max_jobs: int | None) -> WorkerConfig:
        """The options of child ``number`` of ``processes``, each running ``concurrency``
        jobs at once: the sized queues' slots dealt out so that each child's add up to
        no more than its own (a queue a child has no slot for is not among its queues),
        and ``max_jobs``, this child's part of the worker's."""
        sizes = deal_sizes(self.queues, self.sizes, self.concurrency, self.processes)[number]
        rest = [q for q in self.queues if q not in self.sizes]
        taken = sum(sizes.values())
        queues = [q for q in self.queues if q in sizes or (q in rest and taken < self.concurrency)]
        return replace(self, queues=tuple(queues), sizes=sizes, max_jobs=max_jobs, processes=0)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "queues": list(self.queues), "sizes": dict(self.sizes)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkerConfig:
        return cls(
            **{
                **data,
                "queues": tuple(data["queues"]),
                "retry_policy": RetryPolicy(**data["retry_policy"]),
            }
        )


def deal_sizes(
    queues: Sequence[str], sizes: Mapping[str, int], per_child: int, processes: int
) -> list[dict[str, int]]:
    """The sized queues' slots dealt to ``processes`` children of ``per_child`` slots
    each, one at a time to the child with the fewest so far. ValueError when they
    cannot fit (each child's sizes at most its slots, every unsized queue a slot left
    in some child, and a child with no unsized queue to fill its rest fully sized)."""
    dealt: list[dict[str, int]] = [{} for _ in range(processes)]
    totals = [0] * processes
    for queue in queues:
        for _ in range(sizes.get(queue, 0)):
            child = min(range(processes), key=lambda n: totals[n])
            if totals[child] >= per_child:
                raise ValueError(
                    f"the queue sizes add up to {sum(sizes.values())} slot(s) but the worker "
                    f"has {per_child * processes}: make them agree"
                )
            dealt[child][queue] = dealt[child].get(queue, 0) + 1
            totals[child] += 1
    rest = [q for q in queues if q not in sizes]
    if rest and all(total >= per_child for total in totals):
        raise ValueError(
            f"the sized queues take all of the worker's {per_child * processes} slot(s), "
            f"leaving none for {', '.join(rest)}: give more slots (--concurrency) or size "
            "every queue"
        )
    if not rest and any(0 < total < per_child for total in totals):
        raise ValueError(
            f"the queue sizes add up to {sum(sizes.values())} slot(s) but the worker has "
            f"{per_child * processes}: make them agree (or leave a queue unsized to take the rest)"
        )
    return dealt


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
