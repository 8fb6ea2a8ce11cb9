"""A supervised child worker's line to its supervisor: which leases it holds.

The child claims, runs and completes its own jobs; the supervisor keeps their
leases alive (its heartbeat is in another process: no task can starve it) and
ends them itself when the child dies. So the supervisor must know every lease the
child holds before any of them may start (``hold``: one message per claim), and
when the child lets them go (``gone``: one message per batch of let-go leases).
What runs when is on the board (``board.py``), not in messages, and so is until
when the supervisor's renewals hold: ``stop_by`` says when the child must stop.

Each held lease gets an index of the child's (1 .. capacity - 1): its place on the
board. An index is given again only after its ``gone`` was sent, and messages
arrive in order, so the supervisor never takes one lease for another.

Child -> supervisor, one JSON message per frame:

* ``["ready"]``: set up, about to claim;
* ``["hold", queue, sent, [[index, id, token, lease_ms, limit_s, task, attempt,
  max_attempts], ...]]``: claimed (``sent``: ``time.monotonic()`` before the claim);
* ``["gone", [index, ...], stats]``: let go (completed, retried, released...), with the
  child's counts so far;
* ``["bye", stats]``: done (a burst, its share of max_jobs, or a stop).

Supervisor -> child: ``["config", {...}]`` first, then ``["stop", queue, id, token,
name, why]`` (the soft stop of one run: ``TimeLimitExceeded`` or ``Cancelled``),
``["lost", queue, id, token, why]`` (the lease was lost: discard its outcome) and
``["shutdown", deadline]`` (stop claiming, finish what runs, say bye; ``deadline``:
``time.monotonic()`` at the grace's end, or null).
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from .board import Board, stop_by
from .lease import Lease
from .stats import WorkerStats


def send(conn: Connection, message: Sequence[Any]) -> None:
    conn.send_bytes(json.dumps(message).encode())


def receive(conn: Connection) -> list[Any]:
    message = json.loads(conn.recv_bytes())
    if not isinstance(message, list) or not message or not isinstance(message[0], str):
        raise ValueError(f"not a message: {message!r:.100}")
    return message


class Link:
    """The child's side; every method may be called from any of its threads."""

    def __init__(self, out: Connection, board: Board) -> None:
        self._out = out
        self.board = board
        self._lock = threading.Lock()  # one writer of the pipe; the free indexes
        self._free = list(range(board.capacity - 1, 0, -1))  # a stack: low indexes first
        self.stats = WorkerStats()  # set by the worker: the counts each message carries
        self._holds = 0  # hold reports sent
        # index -> the hold report that told its lease, and when its runs must stop if
        # the supervisor never renews it (its claim's lease, a margin off)
        self._stop_by: dict[int, tuple[int, float]] = {}

    def room(self) -> int:
        """How many more leases the board has places for."""
        return len(self._free)

    def ready(self) -> None:
        with self._lock:
            send(self._out, ["ready"])

    def hold(self, queue: str, sent: float, leases: Sequence[Lease]) -> None:
        """Claimed: tell the supervisor before any of them may start."""
        entries = []
        with self._lock:
            for lease in leases:
                lease.index = index = self._free.pop()
                self.board.held(index)
                self._stop_by[index] = (self._holds + 1, stop_by(sent, lease.lease_ms))
                entries.append([index, lease.claimed.id, lease.claimed.token, lease.lease_ms,
                                lease.limit_s, lease.task, lease.attempt, lease.max_attempts])  # fmt: skip
            send(self._out, ["hold", queue, sent, entries])
            self._holds += 1

    def gone(self, leases: Sequence[Lease]) -> None:
        """Let go: the supervisor no longer keeps them; their indexes are free again."""
        indexes = [lease.index for lease in leases if lease.index]
        if not indexes:
            return
        with self._lock:
            send(self._out, ["gone", indexes, dataclasses.asdict(self.stats)])
            self._free.extend(indexes)
            for index in indexes:
                self._stop_by.pop(index, None)

    def stop_by(self) -> float:
        """When this child must have stopped, unless its supervisor renews its leases
        meanwhile (monotonic; ``inf``: it holds none). A lease the supervisor has not
        read the hold of yet is vouched for by its claim alone."""
        until, read = self.board.renewed()
        with self._lock:
            return min(
                (until if number <= read else own for number, own in self._stop_by.values()),
                default=math.inf,
            )

    def begin(self, lease: Lease) -> None:
        """Its run starts now, in executor thread ``lease.slot``."""
        self.board.begin(lease.slot, lease.index, lease.claimed.token, lease.started)

    def end(self, lease: Lease) -> None:
        self.board.end(lease.slot)

    def bye(self) -> None:
        with self._lock:
            send(self._out, ["bye", dataclasses.asdict(self.stats)])
