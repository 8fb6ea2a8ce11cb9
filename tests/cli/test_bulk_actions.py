"""``echomq retry-dead`` and ``echomq purge`` while workers keep failing jobs.

The reviewer's runs, with real workers failing jobs while the operator acted: the prompt
said "Delete all 1163 dead job(s)" and the purge said "Purged 1619" (the jobs that died
after the prompt went unseen); ``retry-dead`` of 5,000 dead jobs said "retried: 5176"
(jobs revived twice in one command) and, with enough failing workers, need never end;
a Ctrl-C printed a raw traceback and no count. Each command now acts on the set as it
was when it read it, and a Ctrl-C stops it between two calls with what was done.
"""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.management.base import CommandError

from echomq_django.engine.jobs import Jobs
from echomq_django.engine.worker import Failure, Worker
from tests.cli.conftest import DEAD_ERROR, echomq_cmd, enqueue, make_dead, manage_py

Q = "default"


@contextmanager
def failing_worker(jobs: Jobs, pause_s: float = 0.0) -> Iterator[Worker]:
    """A real worker in a thread that fails every job it claims for good."""

    def fail(claimed) -> Failure:
        time.sleep(pause_s)
        return Failure(error=DEAD_ERROR, summary="ValueError: boom", retry=False)

    worker = Worker(jobs, [Q], fail, lease_ms=10_000, grace_s=5.0, idle_block_s=0.05)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(10)


def wait_for(check, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class Answer(io.StringIO):
    """stdin for the purge's question: ``before`` runs while the operator reads it."""

    def __init__(self, before, text: str = "y\n") -> None:
        super().__init__(text)
        self.before = before

    def readline(self, *args) -> str:  # type: ignore[override]
        self.before()
        return super().readline(*args)


def prompt_count(err: str) -> int:
    return int(re.search(r"Delete all (\d+) dead job", err).group(1))


def test_purge_deletes_the_jobs_its_question_counted(jobs, monkeypatch):
    make_dead(jobs, Q, 3)
    later = []
    monkeypatch.setattr("sys.stdin", Answer(lambda: later.extend(make_dead(jobs, Q, 4))))
    result = echomq_cmd("purge", Q, "dead", "--batch", "2")
    assert "Delete all 3 dead job(s) of queue default?" in result.err
    assert result.out.strip() == "Purged 3 dead job(s) of default."
    assert sorted(jobs.connector.client.zrange("emq:{default}:dead", 0, -1)) == sorted(later)


def test_purge_while_a_worker_fails_jobs_says_what_it_asked(jobs, monkeypatch):
    enqueue(jobs, Q, 600, max_attempts=1)
    monkeypatch.setattr("sys.stdin", Answer(lambda: time.sleep(0.2)))  # the operator reads
    with failing_worker(jobs, pause_s=0.002):
        wait_for(lambda: jobs.stats(Q).counts["dead"] >= 20)
        result = echomq_cmd("purge", Q, "dead", "--batch", "3")
    asked = prompt_count(result.err)
    assert result.out.strip() == f"Purged {asked} dead job(s) of default."
    assert jobs.stats(Q).counts["dead"] > 0  # those that died after the question are kept


def test_retry_dead_retries_each_job_once_while_a_worker_fails_them_again(jobs):
    """The worker fails every revived job again within milliseconds: before, the command
    revived them again (more "retried" than there were dead jobs), and it ended only
    when the worker happened to be slower than the command."""
    dead = make_dead(jobs, Q, 300)
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["report"] = echomq_cmd("retry-dead", Q, "--batch", "7", "--json").json()
        except BaseException as exc:  # reported below
            outcome["error"] = exc

    with failing_worker(jobs):
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(30)
        ended = not thread.is_alive()
        if ended:  # each revived job fails again, once
            wait_for(lambda: jobs.stats(Q).counts["dead"] == 300)
    thread.join(30)  # the worker stopped, the dead set no longer refills: it ends now
    assert ended, "retry-dead was still going after 30 s"
    assert "error" not in outcome, outcome
    assert outcome["report"]["retried"] == 300
    assert jobs.stats(Q).metrics["revived"] == 300, "each job revived once"
    assert all(jobs.get(Q, i).state == "dead" for i in dead)


def test_ctrl_c_at_the_question_deletes_nothing(jobs, monkeypatch):
    make_dead(jobs, Q, 2)

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("sys.stdin", Answer(interrupted))
    try:
        with pytest.raises(CommandError, match="purge cancelled: nothing was deleted"):
            echomq_cmd("purge", Q, "dead")
    except KeyboardInterrupt:  # would stop the whole test session
        pytest.fail("Ctrl-C at the question escaped the command: a traceback")
    assert jobs.stats(Q).counts["dead"] == 2


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ctrl_c_stops_between_two_calls_and_says_what_was_done(jobs, echomq, as_json):
    """SIGINT to ``manage.py echomq retry-dead``: no traceback, the count of jobs moved
    (exactly those now pending), the others still dead, exit status 130."""
    make_dead(jobs, Q, 4000)
    proc = manage_py(
        "echomq", "retry-dead", Q, "--batch", "1", *(["--json"] if as_json else []),
        url=echomq, wait=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_for(lambda: jobs.stats(Q).counts["pending"] >= 50 or proc.poll() is not None)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    counts = jobs.stats(Q).counts
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "interrupted after" in err and "the others are untouched" in err
    if as_json:
        report = json.loads(out)
        assert report["interrupted"] is True
        retried = report["retried"]
    else:
        said = re.fullmatch(r"Interrupted: (\d+) dead job\(s\) of default back to pending\.\n", out)
        assert said, out
        retried = int(said.group(1))
    assert 0 < retried < 4000
    assert (counts["pending"], counts["dead"]) == (retried, 4000 - retried)
