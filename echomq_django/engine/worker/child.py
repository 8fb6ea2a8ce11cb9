"""The child process's side of ``children.Child``: serve ``run`` and ``stop`` messages.

Started as ``python -m echomq_django.engine.worker.child FD HANDLER INIT THREADS PPID``
(a fresh interpreter, never a fork). It is a module of its own, apart from the
parent's side, so that ``-m`` runs it without the package having imported it first.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import queue
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

from ..errors import Cancelled, TimeLimitExceeded
from ..jobs import Claimed
from ..outcome import call_handler
from .children import (
    Key,
    Message,
    claimed_from_json,
    decode,
    encode,
    outcome_json,
    raise_in_thread,
)


def resolve(ref: Any) -> Any:
    """``"package.module:attr.attr"`` -> that object; anything else as it is."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for name in attr.split(".") if attr else ():
        obj = getattr(obj, name)
    return obj


def _die_with_parent(parent: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PDEATHSIG
    except (AttributeError, OSError):

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(0.2)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(1)


def _child_main(conn: Any, handler: Any, initializer: Any, threads: int, parent: int) -> None:
    """The child: serve ``run`` and ``stop`` messages until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent(parent)
    if initializer:
        resolve(initializer)()
    handler = resolve(handler)
    running: dict[Key, int] = {}  # key -> the thread running it
    work: queue.SimpleQueue[tuple[Key, Claimed]] = queue.SimpleQueue()
    outbox = _Outbox(conn)

    def serve() -> None:  # one of ``threads`` long-lived threads: no thread per job
        while True:
            key, claimed = work.get()
            running[key] = threading.get_ident()
            try:
                try:
                    outcome = call_handler(handler, claimed)
                finally:
                    running.pop(key, None)
                outbox.send(("done", key, outcome_json(outcome)))
            except BaseException:
                # A thread that cannot answer would leave its job unanswered for ever
                # while the parent renews its lease: die instead, and the parent's
                # per-job accounting handles the jobs that ran here (see running.py).
                traceback.print_exc()
                os._exit(70)

    for _ in range(threads):
        threading.Thread(target=serve, daemon=True).start()
    while True:
        try:
            frame = decode(conn.recv_bytes())
        except (EOFError, OSError):
            os._exit(0)
        for kind, key, arg in frame:
            if kind == "run":
                work.put((key, claimed_from_json(arg)))
            elif kind == "stop" and key in running and arg in _STOPS:
                raise_in_thread(running[key], _STOPS[arg])


class _Outbox:
    """Outcomes to the parent. The thread that finds no send under way sends, and goes
    on sending what others queued meanwhile, in one frame each time: no outcome
    waits for a later job, and under load many share one write."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._queued: list[Message] = []
        self._sending = False

    def send(self, message: Message) -> None:
        with self._lock:
            self._queued.append(message)
            if self._sending:
                return  # the sender takes it with its next frame
            self._sending = True
        while True:
            with self._lock:
                batch, self._queued = self._queued, []
                if not batch:
                    self._sending = False
                    return
            self._conn.send_bytes(encode(*batch))


_STOPS: dict[str, type[BaseException]] = {
    "TimeLimitExceeded": TimeLimitExceeded,
    "Cancelled": Cancelled,
}


if (
    __name__ == "__main__"
):  # python -m echomq_django.engine.worker.child FD HANDLER INIT THREADS PPID
    fd, handler_path, init_path, n_threads, parent_pid = sys.argv[1:6]
    _child_main(Connection(int(fd)), handler_path, init_path, int(n_threads), int(parent_pid))
