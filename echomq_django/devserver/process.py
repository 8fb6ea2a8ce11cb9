"""Child processes that never outlive us: the servers, and the launcher's web and workers.

A child gets a process group of its own (a Ctrl-C in our terminal reaches us
only; we decide how it stops) and, on Linux, SIGTERM when we die without
cleaning up (``PR_SET_PDEATHSIG``). Servers still running when the interpreter
exits are stopped: the exit hook is registered with the first server started,
not when this module is imported.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol

_PR_SET_PDEATHSIG = 1


class Stoppable(Protocol):
    def stop(self, timeout: float = ...) -> None: ...


_live: weakref.WeakSet[Stoppable] = weakref.WeakSet()


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, loaded once in the parent (never in a forked child)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


def _child_setup(prctl: Callable[..., int] | None) -> None:  # pragma: no cover - in the child
    os.setpgid(0, 0)
    # Linux ties the death signal to the thread that spawned the child: spawn from a
    # thread that lives as long as the child should.
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def spawn(argv: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **popen_kwargs)`` in a group of its own, dying with us."""
    prctl = _prctl()
    return subprocess.Popen(argv, preexec_fn=functools.partial(_child_setup, prctl), **popen_kwargs)


def _stop_all() -> None:
    for server in list(_live):
        with contextlib.suppress(Exception):
            server.stop(timeout=5.0)


@functools.cache
def _register_exit_hook() -> None:
    atexit.register(_stop_all)


def track(server: Stoppable) -> None:
    """Stop ``server`` at interpreter exit unless it was stopped before."""
    _register_exit_hook()
    _live.add(server)


def untrack(server: Stoppable) -> None:
    _live.discard(server)
