"""A job run in a child process, so that a task that crashes its process kills only the child.

A thread-mode worker runs a *solo* job (it was running when a worker died) in such a
child (``running.Runner``): if the child dies, the crash is that job's beyond doubt.
(``--processes`` runs whole child workers instead: ``supervisor``.)

A ``Child`` is one process, a fresh interpreter (never forked: the parent has
threads, and a fork would copy their locks mid-use), given the handler by its
import path (``child.py`` is its side). It runs one job at a time, in a thread
of its own, and talks to the parent over two pipes (stops have their own, so that
the job thread reads its jobs from the other itself):

* parent -> child ``run`` (a lease's key and its claimed row): run the handler on it;
* parent -> child ``stop`` (a key and ``TimeLimitExceeded`` or ``Cancelled``): raise
  it inside that job's thread (the soft stop, which task code can observe);
* child -> parent ``done`` (a key and the outcome: a result or a failure).

Messages are JSON (``send_bytes``), never pickle: a row's text goes to the child as
data, whatever it holds. The parent keeps the leases (its heartbeat is not in the
child, so a task holding the GIL in a C call cannot starve it), and it sees a child
die: ``run`` then answers ``ChildDied`` for every job the child was running, which
is how the worker knows whose crash it was. The parent kills a child whose job
outlived its soft stop. A child runs in a process group of its own, and every kill
of it kills the group: what its task started there dies with the run. A child dies
with its parent (``PR_SET_PDEATHSIG`` on Linux; a watch on the parent's pid
elsewhere), and a guard process in its group kills the group once the child is gone:
a killed worker never leaves a task running that the reaper then hands to another
worker. Children do nothing on SIGINT and SIGTERM: stopping them is the parent's
decision (by a handler, not ``SIG_IGN``, so the processes a task starts get the
default actions).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, TypeVar, cast

from ..jobs import Claimed, Job
from ..outcome import Failure, Outcome, Success

Key = tuple[str, str, int]  # (queue, job id, token): one lease
T = TypeVar("T")
_CHILD_MODULE = f"{__package__}.child"  # what a child process runs (python -m)


class ChildDied(Exception):
    """The child process running the job died (a crash, a kill) before it answered."""

    def __init__(self, exitcode: int | None, running: int, killed_for: Key | None = None) -> None:
        self.exitcode = exitcode
        self.running = running  # jobs the child was running when it died, this one included
        self.killed_for = killed_for  # the job whose stop made the parent kill it, if any
        if exitcode is None or exitcode >= 0:
            how = f"exit status {exitcode}"
        else:  # killed by a signal: subprocess reports it negated
            how = f"signal {signal.Signals(-exitcode).name}"
        super().__init__(f"its process died ({how}) while running {running} job(s)")


# Popen arguments that start a child in a process group of its own: a kill of the group
# (``kill_group``) reaches every process its tasks started in it, and a Ctrl-C in the
# terminal reaches only the parent, whose decision a stop is.
NEW_GROUP: dict[str, Any] = {"process_group": 0}


def kill_group(pid: int) -> None:
    """SIGKILL the group of the child ``pid`` (its leader): the child, and whatever its
    tasks started that did not leave the group (``setsid`` does).

    Called only while ``pid`` is not yet reaped, or while its group has a member left:
    until both are gone, the number cannot be another process's or group's."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


READER_JOIN_S = 5.0  # close() waits this long for the reader (a child that cannot be killed)
OnEnd = Callable[[Any], None]  # takes the job's outcome, or a ChildDied


@dataclass(eq=False, slots=True)
class _Process:
    """One process of a child, and what is its own: a restarted child's jobs and the
    reason for a kill never mix with the previous process's."""

    popen: subprocess.Popen[bytes]
    conn: Connection  # runs to the child, outcomes back
    stops: Connection
    pending: dict[Key, OnEnd] = field(default_factory=dict)
    killed_for: Key | None = None
    reader: threading.Thread | None = None  # reads conn; alone closes the pipes (_read)


class Child:
    """One child process running one job at a time; ``run`` sends one and returns, and
    the child's reader thread hands its outcome (or the child's death) to the job's
    ``on_end``."""

    def __init__(
        self, handler: str | Callable[[Claimed], Any], *, initializer: str | None = None
    ) -> None:
        """``handler``: an import path ``"package.module:function"`` (resolved in the child
        after ``initializer``, also a path, has run: e.g. ``django.setup``), or a
        function the child can import by reference."""
        self.handler = handler
        self.initializer = initializer
        self._lock = threading.Lock()
        self._process: _Process | None = None

    @property
    def pid(self) -> int | None:
        return self._process.popen.pid if self._process is not None else None

    def start(self) -> None:
        """Start the process: a fresh interpreter (``python -m`` this module), not a
        multiprocessing spawn, which would import the parent's ``__main__`` again in
        the child (a script without a main guard would start workers without end).
        It takes a while, so do it ahead."""
        ours, theirs = socket.socketpair()
        our_stops, their_stops = socket.socketpair()
        handler = self.handler if isinstance(self.handler, str) else _path_of(self.handler)
        fds = [theirs.fileno(), their_stops.fileno()]
        argv = [sys.executable, "-m", _CHILD_MODULE, *map(str, fds), handler,
                self.initializer or "", str(os.getpid())]  # fmt: skip
        # The child imports what this process can: its sys.path (a manage.py's folder is
        # on it only as the script's own) goes along.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        # Started by the starter thread, never by the caller's: PR_SET_PDEATHSIG fires
        # when the *thread* that forked the child exits, and the caller may be an
        # executor thread that exits (one abandoned past a time limit, say).
        popen = _starter.call(
            lambda: subprocess.Popen(
                argv, pass_fds=fds, stdin=subprocess.DEVNULL, close_fds=True, env=env,
                **NEW_GROUP,
            )
        )  # fmt: skip
        theirs.close()
        their_stops.close()
        self._process = process = _Process(
            popen, Connection(ours.detach()), Connection(our_stops.detach())
        )
        process.reader = threading.Thread(
            target=self._read, args=(process,), name="echomq-child-reader", daemon=True
        )
        process.reader.start()

    def alive(self) -> bool:
        return self._process is not None and self._process.popen.poll() is None

    def run(self, key: Key, claimed: Claimed, on_end: OnEnd) -> None:
        """Send the job and return: the reader thread calls ``on_end`` with its outcome
        (the handler's, or a ``ChildDied``), exactly once."""
        with self._lock:
            if not self.alive():
                self.start()
            process = self._process
            assert process is not None
            # Registered under the lock: the reader of a process that died takes its
            # jobs under it too, after the death (alive() above restarts a dead one).
            process.pending[key] = on_end
            with contextlib.suppress(OSError, EOFError, ValueError):
                process.conn.send_bytes(encode(("run", key, claimed_json(claimed))))

    def stop(self, key: Key, exc: type[BaseException]) -> None:
        """The soft stop: raise ``exc`` inside the job's thread in the child."""
        with self._lock:
            process = self._process
            if process is not None and key in process.pending:
                with contextlib.suppress(OSError, EOFError, ValueError):
                    process.stops.send_bytes(encode(("stop", key, exc.__name__)))

    def kill(self, for_key: Key | None = None) -> None:
        """SIGKILL the child (``for_key``'s job outlived its soft stop, or a shutdown's
        grace ran out) and wait until it is gone: only then may its jobs go elsewhere."""
        process = self._process
        if process is not None and process.popen.poll() is None:
            process.killed_for = for_key
            kill_group(process.popen.pid)  # with whatever its job started
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(10)

    def close(self) -> None:
        """Kill the child and wait for its reader to end its jobs and close its pipes.

        The reader alone closes them: it may be reading one, and a descriptor closed
        under a read, or closed twice, may by then be another file's (a socket's)."""
        self.kill()
        process = self._process
        if process is not None and process.reader not in (None, threading.current_thread()):
            process.reader.join(READER_JOIN_S)

    def _read(self, process: _Process) -> None:
        """Hand each outcome to its job's ``on_end`` (in this thread: no executor is
        woken per job); when the process is gone, every job left in it gets
        ``ChildDied`` (with the number of jobs it was running)."""
        pending = process.pending
        exited = Exited(process.conn, process.popen)
        while exited.readable():
            try:
                kind, key, outcome = decode(process.conn.recv_bytes())
            except (EOFError, OSError):
                break
            if kind == "done":
                with self._lock:
                    on_end = pending.pop(key, None)
                if on_end is not None:
                    on_end(outcome_from_json(outcome))
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(10)
        with self._lock:
            left = list(pending.values())
            pending.clear()
            process.conn.close()
            process.stops.close()
        died = ChildDied(process.popen.returncode, len(left), process.killed_for)
        for on_end in left:
            on_end(died)


EXIT_POLL_S = 0.1  # how often a reader with nothing to read looks whether its child exited
DRAIN_S = 1.0  # past a child's exit, how long its reader may take to read what it left


class Exited:
    """When a child's pipe has nothing more to read: at EOF, or once the child itself
    has exited and what it wrote is read (at most DRAIN_S).

    EOF alone comes only once every copy of the child's end is closed, and a process
    a task forked holds one: a reader waiting for EOF would wait for that process,
    long after the child died (its time-limit kill unnoticed, its jobs not ended)."""

    def __init__(self, conn: Connection, popen: subprocess.Popen[bytes]) -> None:
        self._conn = conn
        self._popen = popen
        self._drain_end: float | None = None

    def readable(self) -> bool:
        """Wait until a read will not block (True: read, and EOF may come), or until
        the child is gone and nothing it wrote is left (False)."""
        while self._drain_end is None:
            if self._conn.poll(EXIT_POLL_S):
                return True
            if self._popen.poll() is not None:  # all it wrote is in the pipe by now
                self._drain_end = time.monotonic() + DRAIN_S
        return time.monotonic() < self._drain_end and self._conn.poll(0)


class _Starter:
    """A thread that lives as long as the process, which starts the children:
    ``PR_SET_PDEATHSIG`` (``child.die_with_parent``) kills a child when the thread
    that forked it exits, not the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]]
        self._calls = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def call(self, start: Callable[[], T]) -> T:
        """``start()`` called in the starter thread; its result, or its exception."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._serve, name="echomq-child-starter", daemon=True
                )
                self._thread.start()
        answer: list[Any] = []
        done = threading.Event()
        self._calls.put((start, answer, done))
        done.wait()
        result, error = answer
        if error is not None:
            raise error
        return cast(T, result)

    def _serve(self) -> None:
        while True:
            start, answer, done = self._calls.get()
            try:
                answer[:] = [start(), None]
            except BaseException as exc:  # the caller's to handle
                answer[:] = [None, exc]
            finally:
                done.set()


_starter = _Starter()


def raise_in_thread(thread_id: int, exc: type[BaseException] | None) -> bool:
    """Raise ``exc`` in another thread of this process at its next bytecode (None:
    withdraw one not yet raised).

    The one way Python offers to stop a running function from outside; a thread
    inside a long C call sees it only when the call returns (say so to users).
    """
    set_async = ctypes.pythonapi.PyThreadState_SetAsyncExc
    changed: int = set_async(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)
    return changed == 1


def _path_of(function: Any) -> str:
    return f"{function.__module__}:{function.__qualname__}"


Message = tuple[str, Key, Any]  # (kind, key, body)


def encode(message: Message) -> bytes:
    """One message, one frame."""
    return json.dumps(message).encode()


def decode(data: bytes) -> Message:
    kind, key, body = json.loads(data)
    return kind, (key[0], key[1], key[2]), body


_JOB_FIELDS = tuple(f.name for f in dataclasses.fields(Job))


def claimed_json(claimed: Claimed) -> list[Any]:
    """The job as its fields' values in order (not ``asdict``: it deep-copies, per job)."""
    job = claimed.job
    values = None if job is None else [getattr(job, name) for name in _JOB_FIELDS]
    return [claimed.queue, claimed.id, claimed.token, values, claimed.corrupt]


def claimed_from_json(body: list[Any]) -> Claimed:
    queue, job_id, token, values, corrupt = body
    job = None
    if values is not None:
        job = Job(*values)
        job.worker_ids = tuple(job.worker_ids)
    return Claimed(queue, job_id, token, job, corrupt)


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    if isinstance(outcome, Success):
        return {"result": outcome.result}
    failure = {f.name: getattr(outcome, f.name) for f in dataclasses.fields(outcome)}
    return {"failure": {**failure, "error": str(outcome.error)}}  # a plain str on the wire


def outcome_from_json(body: dict[str, Any]) -> Outcome:
    if "result" in body:
        return Success(body["result"])
    return Failure(**body["failure"])
