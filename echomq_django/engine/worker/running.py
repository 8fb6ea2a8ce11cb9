"""Where and how a claimed job's handler runs, and how a time limit (or a cancel) stops it.

* The handler runs in the worker's executor thread. A soft stop raises
  ``TimeLimitExceeded`` (or ``Cancelled``) inside that thread; a task stuck in one
  long C call sees it only when the call returns, so past the hard grace the run is
  *abandoned*: its failure is recorded at once, not retried (the stuck thread may
  still run, and must never run beside a retry), another thread takes its slot,
  and the stuck thread's eventual outcome is discarded. (A supervised child worker sets
  no deadlines here: its supervisor stops its runs, and kills it past the grace.)
* A **solo** job (it was running when a worker died) runs in a child process of
  its own (``children.Child``) whenever the handler can be sent to one (a
  module-level function): if that child dies, the crash is the job's beyond doubt,
  and a SIGKILL of the worker itself is never charged to it (see reap.lua). Past
  the hard grace after a soft stop, the limit watch kills that child.

``run`` answers an Outcome, or a ``Crashed`` when the job's process died under it.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import Cancelled, TimeLimitExceeded
from ..jobs import Claimed
from ..outcome import Failure, Handler, Outcome, call_handler, error_json
from .children import Child, ChildDied, Key, raise_in_thread

HARD_GRACE_S = 2.0  # after a soft stop, how long a run may take to end before it is killed
_NEVER = float("inf")


@dataclass(frozen=True, slots=True)
class Crashed:
    """The job's process died while it ran. ``alone``: nothing else ran in it, so the
    crash is this job's; ``ours``: the worker killed it (another job's time limit)."""

    why: str
    alone: bool
    ours: bool = False


RunResult = Outcome | Crashed
OnEnd = Callable[[RunResult], None]


def stopped_failure(exc: type[BaseException], why: str) -> Failure:
    """The failure of a run stopped from outside: retried per policy unless cancelled."""
    path = f"{exc.__module__}.{exc.__qualname__}"
    summary = f"{exc.__name__}: {why}"
    return Failure(error_json(path, summary), summary, retry=exc is not Cancelled)


@dataclass(eq=False, slots=True)
class _Run:
    key: Key
    deadline: float  # monotonic; inf without a limit
    thread: int = 0
    child: Child | None = None
    stop: type[BaseException] | None = None  # the soft stop sent, if any
    stopped_at: float = 0.0
    hard_stopped: bool = False  # past the hard grace: abandoned (a thread), killed (a child)
    done: bool = False  # the handler returned: no soft stop may be raised in its thread


class Runner:
    """Runs handlers for one worker; ``stop`` and the limit watch may be called from any thread."""

    def __init__(
        self,
        handler: Handler,
        *,
        child_handler: str | None = None,
        initializer: str | None = None,
        isolate: bool = True,
        on_abandon: Callable[[Key, Failure], None] | None = None,
        hard_grace_s: float = HARD_GRACE_S,
    ) -> None:
        """``isolate``: run solo jobs in a child process when the handler can be sent to
        one: by ``child_handler``, its import path, or by reference (a module-level
        function); the child runs ``initializer`` (a path too) first."""
        self.handler = handler
        self.hard_grace_s = hard_grace_s
        self.on_abandon = on_abandon
        remote = (child_handler or _importable(handler)) if isolate else None
        self._solo_child = Child(remote, initializer=initializer) if remote else None
        self.can_isolate = self._solo_child is not None
        self._runs: dict[Key, _Run] = {}
        self._lock = threading.Lock()

    def run(self, key: Key, claimed: Claimed, solo: bool, limit_s: float) -> RunResult:
        """Run the handler on ``claimed`` in this thread, or a solo job in the solo
        child; blocks until it ends."""
        child = self._solo_child if solo else None
        run = self._begin(key, limit_s, child)
        if child is None:
            try:
                return call_handler(self.handler, claimed)
            except (TimeLimitExceeded, Cancelled) as exc:  # it landed outside the task
                return stopped_failure(type(exc), str(exc) or "stopped")
            finally:
                self._end(run)
        ended = threading.Event()
        result: list[RunResult] = []

        def on_end(outcome: RunResult) -> None:
            result.append(outcome)
            ended.set()

        self._send(run, child, claimed, on_end)
        ended.wait()
        return result[0]

    def _begin(self, key: Key, limit_s: float, child: Child | None = None) -> _Run:
        deadline = time.monotonic() + limit_s if limit_s > 0 else _NEVER
        run = _Run(key, deadline, thread=threading.get_ident(), child=child)
        # No lock on this path (every job takes it): dict stores are atomic, and a soft
        # stop is raised only into a run not yet done (see ``stop``).
        self._runs[key] = run
        return run

    def _end(self, run: _Run) -> None:
        run.done = True
        self._runs.pop(run.key, None)
        if run.child is None and run.stop is not None:  # none may land in its next job
            raise_in_thread(run.thread, None)

    def _send(self, run: _Run, child: Child, claimed: Claimed, on_end: OnEnd) -> None:
        def ended(outcome: Outcome | ChildDied) -> None:
            self._end(run)
            on_end(self._result(run, outcome))

        child.run(run.key, claimed, ended)

    def _result(self, run: _Run, outcome: Outcome | ChildDied) -> RunResult:
        if not isinstance(outcome, ChildDied):
            return outcome
        if outcome.killed_for == run.key and run.stop is not None:
            return stopped_failure(run.stop, f"its process was killed {self.hard_grace_s:g}s after")
        ours = outcome.killed_for is not None
        return Crashed(str(outcome), alone=outcome.running == 1 and not ours, ours=ours)

    def stop(self, key: Key, exc: type[BaseException]) -> None:
        """The soft stop of one run (a cancel, a time limit); the watch enforces the rest."""
        with self._lock:  # one stop at a time (the heartbeat's watch, a cancel)
            run = self._runs.get(key)
            if run is None or run.stop is not None or run.done:
                return
            run.stop, run.stopped_at = exc, time.monotonic()
            run.deadline = min(run.deadline, run.stopped_at)
            if run.child is None:
                raise_in_thread(run.thread, exc)
                if run.done:  # it ended as we raised: withdraw it, if not delivered yet
                    raise_in_thread(run.thread, None)
        if run.child is not None:
            run.child.stop(key, exc)

    def watch(self, now: float) -> float:
        """Enforce time limits: soft stops at the deadline; past the hard grace after
        one, kill a child run's process, abandon a thread run. Returns when to look again."""
        due, hard = [], []
        runs = list(self._runs.values())
        with self._lock:
            for run in runs:
                if run.stop is None and now >= run.deadline:
                    due.append(run)
                elif (
                    run.stop and not run.hard_stopped and now >= run.stopped_at + self.hard_grace_s
                ):
                    run.hard_stopped = True
                    hard.append(run)
            soonest = min(
                (r.stopped_at + self.hard_grace_s if r.stop else r.deadline
                 for r in runs if not r.hard_stopped),
                default=now + 1,
            )  # fmt: skip
        for run in due:
            self.stop(run.key, TimeLimitExceeded)
        for run in hard:
            if run.child is not None:
                run.child.kill(for_key=run.key)  # its reader then ends the run
            elif self.on_abandon is not None:
                # Not retried: its thread may run on, and a retry would run the job
                # twice at once (here or on another worker).
                why = (f"abandoned {self.hard_grace_s:g}s after it was stopped, its thread "
                       "stuck; not retried, as it may still run")  # fmt: skip
                failure = stopped_failure(run.stop or TimeLimitExceeded, why)
                self.on_abandon(run.key, dataclasses.replace(failure, retry=False))
        return max(0.02, min(soonest - now, 1.0))

    def kill_child_runs(self) -> list[Key]:
        """SIGKILL the solo child if a run is in it, and wait until it is gone (a stop's
        grace ran out): only then may its jobs go elsewhere. Returns their keys."""
        keys = [run.key for run in list(self._runs.values()) if run.child is not None]
        if keys and self._solo_child is not None:
            self._solo_child.kill()
        return keys

    def close(self) -> None:
        if self._solo_child is not None:
            self._solo_child.close()


def _importable(obj: object) -> str | None:
    """``obj``'s import path if a spawned child can import it by name (a module-level
    function), else None (a lambda, a closure: it runs in this process only)."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if not module or "<" in name or module == "__main__":
        return None
    found: Any = sys.modules.get(module)
    for part in name.split("."):
        found = getattr(found, part, None)
    return f"{module}:{name}" if found is obj else None
