"""The child process's side of ``children.Child``: serve ``run`` and ``stop`` messages.

Started as ``python -m echomq_django.engine.worker.child RUNS STOPS HANDLER INIT
THREADS PPID`` (a fresh interpreter, never a fork; RUNS and STOPS are the
descriptors of its two pipes). It is a module of its own, apart from the parent's
side, so that ``-m`` runs it without the package having imported it first.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from multiprocessing.connection import Connection
from typing import Any

from ..errors import Cancelled, TimeLimitExceeded
from ..jobs import Claimed
from ..outcome import Outcome, call_handler
from .children import (
    Key,
    Message,
    claimed_from_json,
    decode,
    encode,
    outcome_json,
    raise_in_thread,
)
from .running import stopped_failure


def resolve(ref: Any) -> Any:
    """``"package.module:attr.attr"`` -> that object; anything else as it is."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for name in attr.split(".") if attr else ():
        obj = getattr(obj, name)
    return obj


def die_with_parent(parent: int) -> None:
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


def _child_main(
    runs: Connection, stops: Connection, handler: Any, initializer: Any, threads: int, parent: int
) -> None:
    """The child: its threads serve ``run`` messages and this one ``stop`` messages,
    until the parent closes the pipes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    die_with_parent(parent)
    if initializer:
        resolve(initializer)()
    serving = _Serving(runs, resolve(handler))
    for _ in range(threads):
        threading.Thread(target=serving.serve, daemon=True).start()
    while True:
        try:
            frame = decode(stops.recv_bytes())
        except (EOFError, OSError):
            os._exit(0)
        for kind, key, arg in frame:
            if kind == "stop" and arg in _STOPS:
                serving.stop(key, _STOPS[arg])


class _Serving:
    """The child's threads, each taking the next job from the pipe itself (a thread
    handing them out would cost a switch per job), running it and sending its outcome.

    A soft stop is raised in the thread only while it runs that job: ``running`` is
    read and changed under one lock, and a stop not yet delivered when the job ends is
    withdrawn, so none lands in the thread's next job. The parent sends one per run."""

    def __init__(self, runs: Connection, handler: Any) -> None:
        self._runs = runs
        self._handler = handler
        self._outbox = _Outbox(runs)
        self._receiving = threading.Lock()  # one reader of the pipe at a time
        self._more: deque[tuple[Key, Claimed]] = deque()  # a frame's jobs past its first
        self._lock = threading.Lock()
        self._running: dict[Key, int] = {}  # key -> the thread running it

    def serve(self) -> None:  # one of the child's long-lived threads: no thread per job
        try:
            while True:
                key, claimed = self._next()
                self._outbox.send(("done", key, outcome_json(self._run(key, claimed))))
        except BaseException:
            # A thread that cannot answer would leave its job unanswered for ever while
            # the parent renews its lease: die instead, and the parent's per-job
            # accounting handles the jobs that ran here (see running.py).
            traceback.print_exc()
            os._exit(70)

    def stop(self, key: Key, exc: type[BaseException]) -> None:
        with self._lock:
            thread = self._running.get(key)
            if thread is not None:
                raise_in_thread(thread, exc)

    def _next(self) -> tuple[Key, Claimed]:
        with self._receiving:
            while not self._more:
                try:
                    frame = decode(self._runs.recv_bytes())
                except (EOFError, OSError):
                    os._exit(0)
                self._more.extend((key, claimed_from_json(arg)) for kind, key, arg in frame)
            return self._more.popleft()

    def _run(self, key: Key, claimed: Claimed) -> Outcome:
        me = threading.get_ident()
        try:
            with self._lock:
                self._running[key] = me
            try:
                return call_handler(self._handler, claimed)
            finally:
                with self._lock:
                    self._running.pop(key, None)
                    raise_in_thread(me, None)  # a stop that came too late for it
        except (TimeLimitExceeded, Cancelled) as exc:  # it landed outside the task's code
            with self._lock:
                self._running.pop(key, None)
            return stopped_failure(type(exc), "stopped as it ended")


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


if __name__ == "__main__":  # python -m ...child RUNS STOPS HANDLER INIT THREADS PPID
    runs_fd, stops_fd, handler_path, init_path, n_threads, parent_pid = sys.argv[1:7]
    _child_main(Connection(int(runs_fd)), Connection(int(stops_fd)), handler_path, init_path,
                int(n_threads), int(parent_pid))  # fmt: skip
