"""The supervisor's side of one child worker process: start it, give it orders, read
its reports, and keep the copy of the leases it holds.

The child (``subworker_main``) is a whole worker of its own: it claims, runs and
completes its jobs. Before any claimed job may start it reports the claim (``hold``),
and it reports the leases it let go (``gone``), so the copy here is never short of
a lease the child might run; its board (``board.py``) says which ones run. The
copy is what the supervisor renews (``keeper``), and once the child is dead, what
it ends: the reader reads every report the child sent before it died, then hands
the copy to ``on_exit``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from ..events import EventLog
from ..jobs import Claimed
from .board import Board, stop_by
from .children import NEW_GROUP, Exited, Key, kill_group
from .lease import Lease
from .link import receive, send
from .stats import WorkerStats

logger = logging.getLogger("echomq.worker")

_MAIN = f"{__package__}.subworker_main"
EXTRA_PLACES = 8192  # board places beyond its threads' (each held lease takes one)
REAP_S = 10.0  # how long to wait for a killed child to be gone


class Subworker:
    """One child worker process (``number`` of the supervisor's), restarted in place."""

    def __init__(
        self,
        number: int,
        order: dict[str, Any],
        threads: int,
        events: EventLog,
        on_exit: Callable[[Subworker], None],
    ) -> None:
        self.number = number
        self._order = order  # the config message: the worker's options for this child
        self._threads = threads
        self._events = events  # the job events of the leases the supervisor ends
        self._on_exit = on_exit
        self._lock = threading.Lock()  # the copy, the board, the order line
        self._telling = threading.Lock()  # one order at a time on the line
        # index -> the copy of a held lease (its report, until a copy is needed: _copy)
        self.leases: dict[int, Lease | tuple[str, float, list[Any]]] = {}
        self.board: Board | None = None
        self.popen: subprocess.Popen[bytes] | None = None
        self._orders: Connection | None = None
        self.ready = False  # set up, claiming
        self.done = False  # said bye: it ended by itself (a burst, its max_jobs, a stop)
        # Why the supervisor killed it: the job whose stop it did not obey and that stop's
        # name, or (SHUTDOWN, "") at a stop's grace end.
        self.killed_for: tuple[Key, str] | None = None
        self.reader: threading.Thread | None = None
        self.stats = WorkerStats()  # its counts as last reported
        self.renew_at = float("inf")  # no lease held here needs renewing before this
        self.holds = 0  # hold reports read from this process (its board's stamp says)

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def start(self) -> None:
        """Start a new process (a fresh interpreter: it takes a while to set up)."""
        self.ready = self.done = False
        self.killed_for = None
        self.stats = WorkerStats()
        board = Board.create(self._threads, self._threads + EXTRA_PLACES)
        with self._lock:
            old, self.board = self.board, board
            self.holds = 0
        if old is not None:
            old.close()
        our_orders, their_orders = socket.socketpair()
        our_reports, their_reports = socket.socketpair()
        fds = [their_orders.fileno(), their_reports.fileno(), board.fd]
        argv = [sys.executable, "-m", _MAIN, *map(str, fds), str(board.threads),
                str(board.capacity), str(os.getpid())]  # fmt: skip
        # The child imports what this process can: its sys.path (a manage.py's folder is
        # on it only as the script's own) goes along.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        # In a group of its own, which every kill of it kills (kill_group). Started by the
        # supervisor's main loop alone (Supervisor.run): the child dies when the thread
        # that forked it exits (PR_SET_PDEATHSIG), so never from a thread that may end.
        self.popen = subprocess.Popen(
            argv, pass_fds=fds, stdin=subprocess.DEVNULL, close_fds=True, env=env, **NEW_GROUP
        )
        their_orders.close()
        their_reports.close()
        self._orders = Connection(our_orders.detach())
        self._tell(["config", self._order])
        reports = Connection(our_reports.detach())
        self.reader = threading.Thread(
            target=self._read, args=(reports, self.popen),
            name=f"echomq-sub-{self.number}", daemon=True,
        )  # fmt: skip
        self.reader.start()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    # -- orders -----------------------------------------------------------------------

    def stop_run(self, lease: Lease, stop: str, why: str = "") -> None:
        """The soft stop of one run: ``TimeLimitExceeded`` or ``Cancelled`` raised in it."""
        self._tell(["stop", *lease.key, stop, why])

    def lose(self, lease: Lease, why: str) -> None:
        self._tell(["lost", *lease.key, why])

    def shutdown(self, deadline: float | None = None) -> None:
        """Stop claiming, give back what has not started, finish what runs, then exit;
        ``deadline`` (monotonic): when its grace ends (its reads wait no longer)."""
        self._tell(["shutdown", deadline])

    def kill(self, for_key: Key, stop: str = "") -> None:
        """SIGKILL it (``for_key``: the job whose ``stop`` it did not obey, or SHUTDOWN)
        and wait until it is gone: only then may its jobs go elsewhere."""
        popen = self.popen
        if popen is not None and popen.poll() is None:
            if self.killed_for is None:
                self.killed_for = (for_key, stop)
            kill_group(popen.pid)  # with whatever its tasks started
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(REAP_S)

    def close(self) -> None:
        """Its board is no longer read (the supervisor is done)."""
        with self._lock:
            board, self.board = self.board, None
        if board is not None:
            board.close()

    def _tell(self, order: list[Any]) -> None:
        with self._telling, contextlib.suppress(OSError, ValueError):
            if self._orders is not None:
                send(self._orders, order)

    # -- the copy of its leases ----------------------------------------------------------

    def running(self) -> list[Lease]:
        """The held leases whose runs are on the board now (their start times set)."""
        with self._lock:  # start() may be closing the board of the last process
            on_board = self.board.running() if self.board is not None else []
            runs = []
            for run in on_board:
                lease = self._copy(run.lease_index)
                if lease is not None and lease.claimed.token == run.token:
                    if lease.started != run.started:  # a new run (never a copy's own)
                        lease.started, lease.stamped = run.started, False
                    runs.append(lease)
        return runs

    def held(self) -> list[Lease]:
        with self._lock:
            return [lease for index in list(self.leases) if (lease := self._copy(index))]

    def began(self, lease: Lease) -> bool:
        """Its run began in this process (it may have ended since)."""
        with self._lock:
            return bool(lease.started) or (self.board is not None and self.board.began(lease.index))

    def _copy(self, index: int) -> Lease | None:
        """The copy of the lease at ``index``, made from its report the first time it is
        needed: most leases are let go long before anything needs theirs (lock held)."""
        held = self.leases.get(index)
        if held is None or isinstance(held, Lease):
            return held
        queue, sent, (_, job_id, token, lease_ms, limit_s, task, attempt, max_attempts) = held
        lease = Lease(
            Claimed(queue, job_id, token, None),
            lease_ms,
            renewed_at=sent,
            claimed_at=sent,
            armed=True,
            events=self._events,
            limit_s=limit_s,
            index=index,
        )
        lease.task, lease.attempt, lease.max_attempts = task, attempt, max_attempts
        self.leases[index] = lease
        return lease

    def stamp(self) -> None:
        """Tell the child until when its leases' renewals hold (``board.stamp``): it
        stops then, if this process stops renewing them (frozen, starved, cut off)."""
        with self._lock:
            if self.board is None:
                return
            until = float("inf")
            for held in self.leases.values():
                if isinstance(held, Lease):
                    # One renewed no more does not count: a lost one the child is told
                    # of and lets go; a cancelled run is the keeper's to kill.
                    if held.renewable:
                        until = min(until, stop_by(held.renewed_at, held.lease_ms))
                else:  # (queue, sent, entry): never renewed yet
                    until = min(until, stop_by(held[1], held[2][3]))
            self.board.stamp(until, self.holds)

    def _hold(self, queue: str, sent: float, entries: list[list[Any]]) -> None:
        shortest = min(entry[3] for entry in entries)  # lease_ms
        with self._lock:
            self.holds += 1
            for entry in entries:
                self.leases[entry[0]] = (queue, sent, entry)
            self.renew_at = min(self.renew_at, sent + shortest / 3000)

    def _gone(self, indexes: list[int]) -> None:
        with self._lock:
            for index in indexes:
                self.leases.pop(index, None)

    # -- the reader -------------------------------------------------------------------------

    def _read(self, reports: Connection, popen: subprocess.Popen[bytes]) -> None:
        """Take in its reports until it is gone, then hand its leases to ``on_exit``.

        Gone is its exit, not the EOF of its reports: a process its task forked may
        hold them open long after (``Exited``)."""
        exited = Exited(reports, popen)
        while exited.readable():
            try:
                report = receive(reports)
            except (EOFError, OSError):
                break
            except ValueError as exc:  # never from our child; say so, and end it
                logger.error("child worker %d sent a bad report (%s); stopping it", popen.pid, exc)
                if popen.poll() is None:
                    kill_group(popen.pid)
                break
            kind = report[0]
            if kind == "hold":
                self._hold(report[1], report[2], report[3])
            elif kind == "gone":
                self._gone(report[1])
                self.stats = WorkerStats(**report[2])
            elif kind == "ready":
                self.ready = True
            elif kind == "bye":
                self.stats = WorkerStats(**report[1])
                self.done = True
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(REAP_S)
        reports.close()
        try:
            self._on_exit(self)
        finally:
            with self._lock:
                self.leases.clear()
                self.renew_at = float("inf")
            with self._telling:  # never closed under an order being sent
                orders, self._orders = self._orders, None
                if orders is not None:
                    orders.close()
