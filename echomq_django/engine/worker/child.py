"""The child process's side of ``children.Child``: serve ``run`` and ``stop`` messages.

Started as ``python -m echomq_django.engine.worker.child RUNS STOPS HANDLER INIT
PPID`` (a fresh interpreter, never a fork; RUNS and STOPS are the descriptors of
its two pipes). It is a module of its own, apart from the parent's side, so that
``-m`` runs it without the package having imported it first.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

from ..errors import Cancelled, TimeLimitExceeded
from ..jobs import Claimed
from ..outcome import Outcome, call_handler
from .children import (
    Key,
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
    """This process, and every process a task starts in its group, dies with ``parent``.

    This process dies by ``PR_SET_PDEATHSIG`` (Linux), which needs no thread of its
    own to run (a task may hold the GIL). That signal reaches no descendant, so a
    guard (``_guard_group``) kills the whole group once this process is gone. The
    parent started this process in a group of its own (``children.NEW_GROUP``)."""
    if os.getpgrp() == os.getpid():  # the leader of its own group: guard it
        _guard_group()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (AttributeError, OSError):

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(0.2)
            os.killpg(os.getpgrp(), signal.SIGKILL)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(1)


_PR_SET_PDEATHSIG = 1


def _guard_group() -> None:
    """Fork the group's guard: a process of nothing but a wait (no thread, no task, so
    the GIL is never held), which SIGKILLs the group once this process is gone, however
    it ended. Called first thing, before any thread starts (a fork copies one thread)."""
    me = os.getpid()
    if os.fork() != 0:
        return
    try:  # the guard: never back into the caller's code
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # None of the child's pipes: they end when it does.
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        wake = getattr(signal, "sigtimedwait", None)
        if wake is not None:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
            with contextlib.suppress(AttributeError, OSError):
                ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGUSR1), 0, 0, 0)
        while os.getppid() == me:
            if wake is not None:
                wake({signal.SIGUSR1}, 1.0)
            else:
                time.sleep(0.2)
        os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os._exit(0)


def ignore_stop_signals() -> None:
    """SIGINT and SIGTERM do nothing in this process: stopping it is its parent's decision.

    By a handler, never ``SIG_IGN``: an ignored signal stays ignored across exec, so
    every process a task starts would ignore SIGTERM (``Popen.terminate()`` would do
    nothing); a handler is reset to the default there. A fork of this process (a
    task's ``os.fork``, multiprocessing's "fork") gets the default as well."""
    me = os.getpid()

    def handle(signum: int, frame: object) -> None:
        if os.getpid() != me:  # a fork made by a task: the signal's default action
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)


def _child_main(
    runs: Connection, stops: Connection, handler: Any, initializer: Any, parent: int
) -> None:
    """The child: a thread serves ``run`` messages and this one ``stop`` messages,
    until the parent closes the pipes."""
    die_with_parent(parent)  # first: it forks the group's guard (no thread may run yet)
    ignore_stop_signals()
    if initializer:
        resolve(initializer)()
    serving = _Serving(runs, resolve(handler))
    threading.Thread(target=serving.serve, daemon=True).start()
    while True:
        try:
            kind, key, arg = decode(stops.recv_bytes())
        except (EOFError, OSError):
            os._exit(0)
        if kind == "stop" and arg in _STOPS:
            serving.stop(key, _STOPS[arg])


class _Serving:
    """The child's one job thread: it reads the next job from the pipe, runs it and
    sends its outcome, one job at a time (a solo job runs alone: running.py).

    A soft stop is raised in the thread only while it runs that job: ``running`` is
    read and changed under one lock, and a stop not yet delivered when the job ends is
    withdrawn, so none lands in the next job. The parent sends one per run."""

    def __init__(self, runs: Connection, handler: Any) -> None:
        self._runs = runs
        self._handler = handler
        self._lock = threading.Lock()
        self._running: Key | None = None  # the job being run
        self._thread = 0  # the job thread's ident

    def serve(self) -> None:
        self._thread = threading.get_ident()
        try:
            while True:
                try:
                    _, key, body = decode(self._runs.recv_bytes())
                except (EOFError, OSError):
                    os._exit(0)
                outcome = self._run(key, claimed_from_json(body))
                self._runs.send_bytes(encode(("done", key, outcome_json(outcome))))
        except BaseException:
            # A thread that cannot answer would leave its job unanswered for ever while
            # the parent renews its lease: die instead, and the parent's per-job
            # accounting handles the job that ran here (see running.py).
            traceback.print_exc()
            os._exit(70)

    def stop(self, key: Key, exc: type[BaseException]) -> None:
        with self._lock:
            if self._running == key:
                raise_in_thread(self._thread, exc)

    def _run(self, key: Key, claimed: Claimed) -> Outcome:
        try:
            with self._lock:
                self._running = key
            try:
                return call_handler(self._handler, claimed)
            finally:
                with self._lock:
                    self._running = None
                    raise_in_thread(self._thread, None)  # a stop that came too late for it
        except (TimeLimitExceeded, Cancelled) as exc:  # it landed outside the task's code
            with self._lock:
                self._running = None
            return stopped_failure(type(exc), "stopped as it ended")


_STOPS: dict[str, type[BaseException]] = {
    "TimeLimitExceeded": TimeLimitExceeded,
    "Cancelled": Cancelled,
}


if __name__ == "__main__":  # python -m ...child RUNS STOPS HANDLER INIT PPID
    runs_fd, stops_fd, handler_path, init_path, parent_pid = sys.argv[1:6]
    _child_main(Connection(int(runs_fd)), Connection(int(stops_fd)), handler_path, init_path,
                int(parent_pid))  # fmt: skip
