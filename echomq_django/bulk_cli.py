"""``echomq retry-dead`` and ``echomq purge``: an operator's action on a whole set.

::

    echomq retry-dead QUEUE [JOB_ID ...] [--batch N]        dead jobs back to pending
    echomq purge QUEUE {completed,dead} [--yes] [--batch N] delete a finished set

Without ids, both act on the set as it was when they read it (``Jobs.bound``: how
many jobs, the highest score, the server's clock): purge's question counts exactly
the jobs it deletes, and the jobs that die or complete while it asks or runs are left
alone, so no job is moved twice by one command and the command ends however fast
workers fail jobs. They run as bounded script calls (``--batch`` jobs each) with a
progress bar between them on a terminal. Ctrl-C stops one after the call in flight,
prints (or with ``--json`` reports) what was done so far and exits with status 130;
a second Ctrl-C stops at once.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.core.management.base import CommandError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from . import conf
from .engine.jobs import Sweep

INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C (128 + SIGINT)

Report = Callable[[Sweep], None]


def retry_dead(command: Any, queue: str, job_ids: Sequence[str], batch: int, as_json: bool) -> None:
    jobs = conf.get_jobs()
    ids = list(dict.fromkeys(job_ids))  # each job once, however often it was named
    bound = None if ids else jobs.bound(queue, "dead")  # the dead set as it is now

    def document(sweep: Sweep) -> dict[str, Any]:
        refused = {"refused": sweep.refused} if sweep.refused else {}
        return {"queue": queue, "retried": sweep.moved, "calls": sweep.calls, **refused}

    def said(sweep: Sweep) -> str:
        refused = (
            f"; {sweep.refused} stay dead: a live job holds their idempotency key"
            if sweep.refused
            else ""
        )
        return f"{sweep.moved} dead job(s) of {queue} back to pending{refused}."

    run(
        command,
        f"retry dead jobs of {queue}",
        len(ids) if bound is None else bound.count,
        lambda report: jobs.retry_dead(queue, ids, bound=bound, limit=batch, progress=report),
        document if as_json else None,
        said,
    )


def purge(
    command: Any, queue: str, state: str, interactive: bool, batch: int, as_json: bool
) -> None:
    jobs = conf.get_jobs()
    bound = jobs.bound(queue, state)  # the jobs the question counts are those deleted
    if (
        interactive
        and bound.count
        and not confirm(
            command,
            f"Delete all {bound.count} {state} job(s) of queue {queue}? This cannot be "
            "undone (jobs that end from now on are kept). [y/N] ",
        )
    ):
        raise CommandError("purge cancelled: nothing was deleted")

    def document(sweep: Sweep) -> dict[str, Any]:
        return {"queue": queue, "state": state, "purged": sweep.moved, "calls": sweep.calls}

    run(
        command,
        f"purge {state} jobs of {queue}",
        bound.count,
        lambda report: jobs.purge(queue, state, bound=bound, limit=batch, progress=report),
        document if as_json else None,
        lambda sweep: f"Purged {sweep.moved} {state} job(s) of {queue}.",
    )


def confirm(command: Any, question: str) -> bool:
    """Ask on stderr (stdout may be a JSON pipe); end of input, or Ctrl-C, means no."""
    command.stderr.write(question, ending="")
    command.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except KeyboardInterrupt:
        command.stderr.write("")
        return False
    return answer.strip().lower() in ("y", "yes")


class _Stopped(Exception):
    """Ctrl-C during a bulk action: raised between two of its script calls."""


def run(
    command: Any,
    label: str,
    total: int,
    act: Callable[[Report], Sweep],
    document: Callable[[Sweep], dict[str, Any]] | None,
    said: Callable[[Sweep], str],
) -> None:
    """Run a bulk action's calls with a progress bar and report it: ``document`` (JSON)
    when given, else ``said``. On Ctrl-C, stop between two calls, report what the calls
    so far did, and exit 130 (a CommandError, never a traceback). A second Ctrl-C stops
    at once: what the call then in flight did is not counted."""
    done = Sweep()
    stop = threading.Event()

    def report(sweep: Sweep) -> None:
        nonlocal done
        done = sweep
        bar(sweep)
        if stop.is_set():
            raise _Stopped

    try:
        with _ctrl_c_sets(stop), progress(command, label, total, document is not None) as bar:
            done = act(report)
    except (_Stopped, KeyboardInterrupt) as exc:
        if document is not None:
            command.emit_json({**document(done), "interrupted": True})
        else:
            command.console.print(f"Interrupted: {said(done)}")
        more = (
            "the call in flight may have done more; " if isinstance(exc, KeyboardInterrupt) else ""
        )
        raise CommandError(
            f"interrupted after {done.calls} call(s): {more}the others are untouched",
            returncode=INTERRUPTED,
        ) from None
    if document is not None:
        command.emit_json(document(done))
    else:
        command.console.print(said(done))


@contextmanager
def _ctrl_c_sets(stop: threading.Event) -> Iterator[None]:
    """While inside: the first Ctrl-C sets ``stop`` (the action ends after the call in
    flight, so its count is exact), a second one raises KeyboardInterrupt. Only the main
    thread gets signals: elsewhere, or where SIGINT is ignored (started with nohup), it
    is left as it is."""
    on_main = threading.current_thread() is threading.main_thread()
    if not on_main or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    before = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@contextmanager
def progress(command: Any, label: str, total: int, quiet: bool) -> Iterator[Report]:
    """A transient bar fed by the sweep's per-call callback (on a terminal, unless quiet)."""
    if quiet or not command.console.is_terminal:
        yield lambda sweep: None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=command.console, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda sweep: bar.update(task, completed=sweep.moved + sweep.refused)
