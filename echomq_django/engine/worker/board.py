"""What a supervised child is running, in memory it shares with its supervisor.

A child worker (``subworker_main``) writes on its board, for each of its executor
threads, the job that thread runs and since when, and for each job it holds
whether its run ever began. It writes on every job's start and end: a few bytes of
shared memory, no system call, no message. The supervisor (``supervisor``) reads
it: to renew, stamp, time-limit and cancel the running jobs, and once the child
is dead, to tell the job that was running when it died (its crash) from those that
only waited (per-job accounting).

The supervisor writes one record of its own: until when its renewals hold
(``stamp``, on every beat). The child stops itself when it runs out (``link.py``,
``subworker_main``), so a frozen, starved or cut-off supervisor never leaves its
children running jobs whose leases lapse: the reaper would hand them out again.
Before it exits, the child marks that it stopped itself (``give_up``): its jobs
are charged nothing.

A record is written under a sequence number that is odd while the record is being
written, so a reader never takes a half-written one.

The board lives in an unlinked temporary file mapped by both processes: the
child gets its descriptor, as it gets its pipes.
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
from typing import NamedTuple

_SEQ = struct.Struct("<Q")
_RUN = struct.Struct("<Qqd")  # the lease's index, its token, when its run began (monotonic)
_RECORD = _SEQ.size + _RUN.size
_STAMP = struct.Struct("<dQ")  # until when the supervisor's renewals hold, holds it had read
# Before a lease lapses, its child must have stopped: this much before, at most (a
# quarter of a short lease: the supervisor renews it a third through).
STOP_MARGIN_S = 1.0


def stop_by(renewed_at: float, lease_ms: int) -> float:
    """When the runs of a lease renewed at ``renewed_at`` (monotonic, just before the
    call) must stop if it is renewed no more: a margin before it lapses."""
    return renewed_at + lease_ms / 1000 - min(STOP_MARGIN_S, lease_ms / 4000)


def _size(threads: int, capacity: int) -> int:
    return _stamp_at(threads, capacity) + _SEQ.size + _STAMP.size + 1


def _stamp_at(threads: int, capacity: int) -> int:
    return -(-(threads * _RECORD + capacity) // 8) * 8  # 8-aligned, after the lease bytes


class Running(NamedTuple):
    """A run on the board: the held lease's index, its token, and when it began
    (``time.monotonic()``: one clock for every process of the machine)."""

    lease_index: int
    token: int
    started: float


class Board:
    """``threads`` run records, then one byte per lease index (1: its run began), then
    the supervisor's stamp and the child's give-up byte."""

    def __init__(self, memory: mmap.mmap, fd: int, threads: int, capacity: int) -> None:
        self._memory = memory
        self.fd = fd
        self.threads = threads
        self.capacity = capacity  # lease indexes are 1 .. capacity - 1
        self._began_at = threads * _RECORD
        self._seqs = [0] * threads  # the writer's own sequence numbers
        self._stamp_at = _stamp_at(threads, capacity)
        self._stamp_seq = 0

    @classmethod
    def create(cls, threads: int, capacity: int) -> Board:
        """A new, empty board (the supervisor's side)."""
        fd, path = tempfile.mkstemp(prefix="echomq-board-")
        os.unlink(path)  # gone with the last descriptor: nothing is left behind
        os.ftruncate(fd, _size(threads, capacity))
        return cls(mmap.mmap(fd, _size(threads, capacity)), fd, threads, capacity)

    @classmethod
    def attach(cls, fd: int, threads: int, capacity: int) -> Board:
        """The board the supervisor made, by its descriptor (the child's side)."""
        return cls(mmap.mmap(fd, _size(threads, capacity)), fd, threads, capacity)

    def close(self) -> None:
        self._memory.close()
        os.close(self.fd)

    # -- the child writes -------------------------------------------------------------

    def held(self, index: int) -> None:
        """A new lease takes ``index``: its run has not begun."""
        self._memory[self._began_at + index] = 0

    def begin(self, thread: int, index: int, token: int, started: float) -> None:
        """``thread`` starts running the lease at ``index``."""
        self._memory[self._began_at + index] = 1
        self._write(thread, index, token, started)

    def end(self, thread: int) -> None:
        """``thread`` runs nothing now."""
        self._write(thread, 0, 0, 0.0)

    def _write(self, thread: int, index: int, token: int, started: float) -> None:
        at, seq = thread * _RECORD, self._seqs[thread]
        _SEQ.pack_into(self._memory, at, seq + 1)  # odd: being written
        _RUN.pack_into(self._memory, at + _SEQ.size, index, token, started)
        _SEQ.pack_into(self._memory, at, seq + 2)
        self._seqs[thread] = seq + 2

    def renewed(self) -> tuple[float, int]:
        """The supervisor's last stamp: until when the leases it knew hold (``stop_by``:
        their margin taken off), and how many ``hold`` reports it had read then; (0, 0)
        before its first, or while a write of it does not end (the supervisor stopped in
        it): no lease is vouched for then."""
        memory, at = self._memory, self._stamp_at
        for _ in range(1000):
            (seq,) = _SEQ.unpack_from(memory, at)
            until, holds = _STAMP.unpack_from(memory, at + _SEQ.size)
            if seq % 2 == 0 and _SEQ.unpack_from(memory, at)[0] == seq:
                return until, holds
        return 0.0, 0

    def give_up(self) -> None:
        """This child stops itself: its supervisor no longer renews its leases."""
        self._memory[self._stamp_at + _SEQ.size + _STAMP.size] = 1

    # -- the supervisor writes --------------------------------------------------------

    def stamp(self, until: float, holds: int) -> None:
        """Every lease known after ``holds`` hold reports is renewed up to ``until``
        (``stop_by``; ``inf``: none held). One writer: the supervisor's keeper."""
        at, seq = self._stamp_at, self._stamp_seq
        _SEQ.pack_into(self._memory, at, seq + 1)
        _STAMP.pack_into(self._memory, at + _SEQ.size, until, holds)
        _SEQ.pack_into(self._memory, at, seq + 2)
        self._stamp_seq = seq + 2

    # -- the supervisor reads ---------------------------------------------------------

    def running(self) -> list[Running]:
        """The runs on the board now; a record being written is left out (its thread
        is between two jobs, in the worker's code, not in a task's)."""
        memory, runs = self._memory, []
        for thread in range(self.threads):
            at = thread * _RECORD
            (seq,) = _SEQ.unpack_from(memory, at)
            if seq % 2:
                continue
            run = Running(*_RUN.unpack_from(memory, at + _SEQ.size))
            if run.lease_index and _SEQ.unpack_from(memory, at)[0] == seq:
                runs.append(run)
        return runs

    def began(self, index: int) -> bool:
        return 0 < index < self.capacity and self._memory[self._began_at + index] == 1

    def gave_up(self) -> bool:
        """The child stopped itself, its leases no longer renewed (``give_up``)."""
        return self._memory[self._stamp_at + _SEQ.size + _STAMP.size] == 1
