"""A child's pipes are closed once, by its reader, whatever ends the child; the child
outlives the thread that asked for it, and its end is its exit, not its pipe's EOF.

The reader thread is the one blocked on the child's pipe. When ``close`` also closed the
pipes, the two raced once the killed child's EOF woke the reader: a pipe closed twice
raised EBADF out of a worker's shutdown (the chaos soak's "SIGTERMed workers that did
not stop cleanly"), and a descriptor closed under a read may already be another file's.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from echomq_django.engine.jobs import Claimed, Job
from echomq_django.engine.outcome import Success
from echomq_django.engine.worker.children import Child, ChildDied
from tests.support.waiting import wait_until


def echo(claimed):  # the child's handler, imported by path
    return Success("null")


def nap_or_fork(claimed):
    """Touch ``started``; sleep ``nap`` seconds, or fork a process that sleeps 60 s (its pid written to
    ``pids``) and wait for it."""
    spec = json.loads(claimed.job.payload)
    if "started" in spec:
        Path(spec["started"]).touch()
    if "pids" in spec:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        Path(spec["pids"]).write_text(str(pid))
        os.waitpid(pid, 0)
    time.sleep(spec.get("nap", 0))
    return Success("null")


def claimed(**spec) -> Claimed:
    job = Job(
        "q", "j1", "active", json.dumps(spec), "t", 0, 1, 0, 1, 1000, None, None, None, None,
        None, None, "", "w", ("w",), "[]", "", None, None, "",
    )  # fmt: skip
    return Claimed("q", "j1", 1, job)


def ended_by():
    """What ``on_end`` was called with, when, and ``on_end``."""
    got: list = []
    done = threading.Event()

    def on_end(outcome) -> None:
        got.append(outcome)
        done.set()

    return got, done, on_end


def test_closing_a_child_leaves_the_pipes_to_its_reader():
    for _ in range(25):
        child = Child(f"{__name__}:echo")
        child.start()
        process = child._process
        child.close()  # raised OSError(EBADF) now and then
        readers = [t for t in threading.enumerate() if t.name == "echomq-child-reader"]
        assert readers == []  # it ended the child's jobs and closed the pipes: then close returned
        assert process.conn.closed and process.stops.closed
        assert process.popen.returncode is not None


def test_a_child_never_started_closes_quietly():
    Child(f"{__name__}:echo").close()


def test_a_child_started_by_a_thread_that_exits_lives_on(tmp_path):
    """PR_SET_PDEATHSIG kills a child when the *thread* that forked it exits: the solo
    child, started by whichever executor thread needed it first, was killed when that
    thread ended (an abandoned one does), with the job running in it."""
    child = Child(f"{__name__}:nap_or_fork")
    started = tmp_path / "started"
    got: list = []

    def ask() -> None:  # send the job, and end once it runs (the child is set up)
        child.run(("q", "j1", 1), claimed(nap=1, started=str(started)), got.append)
        wait_until(started.exists, timeout=20)

    asker = threading.Thread(target=ask)
    try:
        asker.start()
        asker.join()
        wait_until(lambda: got, timeout=10)
        assert got == [Success("null")]
    finally:
        child.close()


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads /proc")
def test_a_killed_child_ends_at_once_with_what_its_job_forked():
    """The job forked a process, which holds the child's pipe open: the kill reaches
    it too (the child's process group), and the reader ends the job when the child
    exits (it waited for the EOF, which came when the fork ended, 60 s later)."""
    child = Child(f"{__name__}:nap_or_fork")
    pids = Path(f"/tmp/echomq-test-fork-{os.getpid()}")
    got, done, on_end = ended_by()
    try:
        child.run(("q", "j1", 1), claimed(pids=str(pids)), on_end)
        fork = int(wait_until(lambda: pids.exists() and pids.read_text(), timeout=20))
        child.kill(for_key=("q", "j1", 1))
        assert done.wait(5)
        assert isinstance(got[0], ChildDied) and got[0].killed_for == ("q", "j1", 1)
        wait_until(lambda: not Path(f"/proc/{fork}").exists() or _zombie(fork), timeout=5)
    finally:
        child.close()
        pids.unlink(missing_ok=True)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True
