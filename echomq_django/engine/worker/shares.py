"""Per-queue shares of a worker's slots (``runworker default:4 slow:1``).

One worker's executors are shared by all its queues: without shares, four slow
jobs in ``slow`` hold every slot and a job in ``default`` waits behind them. A
sized queue gets a share of its own: at most that many of its jobs are held
(running or read ahead) and run at once, so it can never take the slots another
queue needs, and claims are made for it only while it has room. The unsized
queues share the slots the sized ones leave. Without sizes every queue is in one
share of all the slots: the worker's behaviour before shares, unchanged.

A share owns its ready jobs (in claim order) and its counters; the ledger keeps
them under its lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .lease import Lease


@dataclass(eq=False, slots=True)
class Share:
    """Slots reserved for ``queues`` (in precedence order), and the jobs held for them."""

    size: int
    queues: tuple[str, ...]
    ready: deque[Lease] = field(default_factory=deque)  # claimed, not started, claim order
    running: int = 0  # started and not finished
    held: int = 0  # held leases
    queued: int = 0  # held leases whose completion waits in the batch (no slot needed)
    claiming: int = 0  # jobs asked for in claims not yet answered
    avg_ms: float | None = None  # moving average of its handler durations
    read_ahead: int = 0  # the last claim's target for it

    def unfinished(self) -> int:
        """Jobs held (or being claimed) and not yet finished: a finished one waits for its
        completion, not a slot."""
        return self.held + self.claiming - self.queued


def plan(queues: Sequence[str], sizes: Mapping[str, int], slots: int) -> list[Share]:
    """The shares of ``slots`` for ``queues`` given the sized ones' ``sizes``: one per
    sized queue, then one for the unsized queues with the rest. ValueError if the sizes
    do not fit the slots (an unsized queue needs one left at least; without one, the
    sizes must use them all, since no queue could use the rest)."""
    unknown = [q for q in sizes if q not in queues]
    if unknown:
        raise ValueError(f"sized queue(s) {', '.join(unknown)} not among the worker's queues")
    for queue, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"the size of queue {queue} must be a positive integer, not {size!r}")
    if not sizes:
        return [Share(slots, tuple(queues))]
    total = sum(sizes.values())
    rest = tuple(q for q in queues if q not in sizes)
    if rest and total >= slots:
        raise ValueError(
            f"the sized queues take {total} of the worker's {slots} slot(s), leaving none for "
            f"{', '.join(rest)}: give more slots (--concurrency) or size every queue"
        )
    if not rest and total != slots:
        raise ValueError(
            f"the queue sizes add up to {total} slot(s) but the worker has {slots}: "
            "make them agree (or leave a queue unsized to take the rest)"
        )
    shares: list[Share] = []
    for queue in queues:  # in the queues' precedence: the rest where its first queue is
        if queue in sizes:
            shares.append(Share(sizes[queue], (queue,)))
        elif queue == rest[0]:
            shares.append(Share(slots - total, rest))
    return shares
