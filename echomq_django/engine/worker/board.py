"""What a supervised child is running, in memory it shares with its supervisor.

A child worker (``subworker_main``) writes on its board, for each of its executor
threads, the job that thread runs and since when, and for each job it holds
whether its run ever began. It writes on every job's start and end: a few bytes of
shared memory, no system call, no message. The supervisor (``supervisor``) reads
it: to renew, stamp, time-limit and cancel the running jobs, and once the child
is dead, to tell the job that was running when it died (its crash) from those that
only waited (per-job accounting).

A thread's record is written under a sequence number that is odd while the
record is being written, so a reader never takes a half-written one.

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


class Running(NamedTuple):
    """A run on the board: the held lease's index, its token, and when it began
    (``time.monotonic()``: one clock for every process of the machine)."""

    lease_index: int
    token: int
    started: float


class Board:
    """``threads`` run records, then one byte per lease index (1: its run began)."""

    def __init__(self, memory: mmap.mmap, fd: int, threads: int, capacity: int) -> None:
        self._memory = memory
        self.fd = fd
        self.threads = threads
        self.capacity = capacity  # lease indexes are 1 .. capacity - 1
        self._began_at = threads * _RECORD
        self._seqs = [0] * threads  # the writer's own sequence numbers

    @classmethod
    def create(cls, threads: int, capacity: int) -> Board:
        """A new, empty board (the supervisor's side)."""
        fd, path = tempfile.mkstemp(prefix="echomq-board-")
        os.unlink(path)  # gone with the last descriptor: nothing is left behind
        os.ftruncate(fd, threads * _RECORD + capacity)
        return cls(mmap.mmap(fd, threads * _RECORD + capacity), fd, threads, capacity)

    @classmethod
    def attach(cls, fd: int, threads: int, capacity: int) -> Board:
        """The board the supervisor made, by its descriptor (the child's side)."""
        return cls(mmap.mmap(fd, threads * _RECORD + capacity), fd, threads, capacity)

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
