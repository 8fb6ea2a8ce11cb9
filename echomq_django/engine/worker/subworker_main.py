"""A supervised child worker: the child's side of ``subworker.Subworker``.

Started as ``python -m echomq_django.engine.worker.subworker_main ORDERS REPORTS BOARD
THREADS CAPACITY PPID`` by a ``Supervisor`` (a fresh interpreter, never a fork: the
parent has threads). ORDERS, REPORTS and BOARD are descriptors: its orders come on
the first (its config first, then soft stops, lost leases, the shutdown), its
leases go out on the second (``link.py``), its runs are written on the board
(``board.py``). It runs a ``Worker`` with that link: the worker claims, runs and
completes its jobs itself; the supervisor keeps their leases.

Like every child, it runs in a process group of its own, which every kill of it
kills (so whatever its tasks started there dies with it), does nothing on SIGINT and
SIGTERM (stopping is the supervisor's decision; by a handler, so the processes its
tasks start get the default), and dies with its parent, its group with it.
And with its parent's renewals: a supervisor frozen (SIGSTOP, a cgroup freezer,
swapping) or cut from the server renews its leases no more, and the reaper would hand
its jobs to another worker while they still run here. So a watch thread reads until
when its supervisor's renewals hold (``Link.stop_by``) and ends this process at once
before then: the supervisor, when it wakes, finds the board's mark and gives its jobs
back, charged nothing (a run cannot be told to stop in time: it may ignore it for long).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from ..errors import Cancelled, TimeLimitExceeded
from .board import Board
from .child import die_with_parent, ignore_stop_signals, resolve
from .config import SWITCH_INTERVAL_S, WorkerConfig
from .link import Link, receive
from .worker import Worker

logger = logging.getLogger("echomq.worker")

WATCH_S = 0.25  # how often the watch reads the board, at least

_STOPS: dict[str, type[TimeLimitExceeded | Cancelled]] = {
    "TimeLimitExceeded": TimeLimitExceeded,
    "Cancelled": Cancelled,
}


def _obey(orders: Connection, worker: Worker) -> None:
    """Carry out the supervisor's orders until it closes the line (then it is gone)."""
    while True:
        try:
            order = receive(orders)
        except (EOFError, OSError):
            os._exit(1)
        kind = order[0]
        if kind == "stop" and order[4] in _STOPS:
            worker.stop_run((order[1], order[2], order[3]), _STOPS[order[4]], order[5])
        elif kind == "lost":
            worker.lose((order[1], order[2], order[3]), order[4])
        elif kind == "shutdown":
            worker.stop(order[1] if len(order) > 1 else None)


def _watch(link: Link) -> None:
    """End this process before a lease it holds can lapse unrenewed."""
    while True:
        left = link.stop_by() - time.monotonic()
        if left <= 0:
            link.board.give_up()  # no log: a frozen supervisor may hold the log's pipe
            os._exit(1)
        time.sleep(min(WATCH_S, left))


def main(argv: list[str]) -> int:
    orders_fd, reports_fd, board_fd, threads, capacity, parent = map(int, argv)
    die_with_parent(parent)  # first: it forks the group's guard (no thread may run yet)
    ignore_stop_signals()
    sys.setswitchinterval(SWITCH_INTERVAL_S)  # this process is the worker's own
    orders = Connection(orders_fd)
    kind, order = receive(orders)
    if kind != "config":
        raise ValueError(f"expected the config first, not {kind!r}")
    config = WorkerConfig.from_json(order["worker"])
    setup: Any = resolve(order["setup"])
    jobs, handler = setup(**order["setup_args"])
    link = Link(Connection(reports_fd), Board.attach(board_fd, threads, capacity))
    options = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    del options["queues"]
    worker = Worker(jobs, config.queues, handler, name=order["name"], link=link, **options)
    threading.Thread(target=_obey, args=(orders, worker), name="echomq-orders", daemon=True).start()
    threading.Thread(target=_watch, args=(link,), name="echomq-watch", daemon=True).start()
    link.ready()
    worker.run()
    if worker.fatal:  # no bye: the supervisor starts it again
        logger.error("child worker %d stopped itself: %s", os.getpid(), worker.fatal)
        return 1
    link.bye()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
