"""``echomq tail``: real ``runworker`` processes, tails started before the jobs run, each
in a child process without a terminal (stdout and stderr are files)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from echomq_django import conf
from echomq_django.engine import events
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from tests.cli.conftest import echomq_cmd, manage_py
from tests.django import tasks
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db
ADD, FAIL = "tests.django.tasks.add", "tests.django.tasks.fail"


class Tail:
    def __init__(self, url: str, tmp_path: Path, *args: str) -> None:
        self.out, self.err = tmp_path / f"tail{len(args)}.out", tmp_path / f"tail{len(args)}.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = manage_py(
                "echomq", "tail", *args, url=url, wait=False, settings="tests.django.settings",
                stdout=out, stderr=err, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        wait_until(lambda: "following" in self.err.read_text(), timeout=30)  # its cursor is set

    def lines(self) -> list[str]:
        return [line for line in self.out.read_text().splitlines() if line]

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(10)


def runworker(url: str, name: str) -> subprocess.CompletedProcess:
    return manage_py(
        "runworker", "default", "emails", "--burst", "--name", name, url=url,
        settings="tests.django.settings",
    )  # fmt: skip


def test_tail_follows_every_workers_events_as_json_and_filters(echomq, tmp_path):
    before = tasks.add.enqueue(0, 0)  # runs before the tails start: not shown
    assert runworker(echomq, "w0").returncode == 0
    everything = Tail(echomq, tmp_path, "--json")
    failures = Tail(echomq, tmp_path, "--queue", "emails", "--task", FAIL)
    ok = [tasks.add.enqueue(i, i) for i in range(3)]
    long = tasks.nap.enqueue(0.5)  # a run past 50 ms: its start is an event too
    failing = tasks.fail.enqueue("kaput")  # max_attempts=2, no backoff: retried, then dead
    first, second = runworker(echomq, "w1"), runworker(echomq, "w2")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr

    def outcomes() -> list[tuple[str, str]]:
        return [(e["job_id"], e["outcome"]) for e in map(json.loads, everything.lines())]

    wanted = {(r.id, "completed") for r in ok} | {(long.id, "started"), (long.id, "completed")}
    wanted |= {(failing.id, o) for o in ("retried", "dead")}
    wait_until(lambda: wanted <= set(outcomes()), timeout=30)
    assert everything.stop(signal.SIGTERM) == 0
    documents = [json.loads(line) for line in everything.lines()]  # every line is one object
    assert before.id not in {d["job_id"] for d in documents}
    assert [o for i, o in outcomes() if i == failing.id] == ["retried", "dead"]
    assert [o for i, o in outcomes() if i == long.id] == ["started", "completed"]
    dead = next(d for d in documents if d["outcome"] == "dead")
    assert (dead["task"], dead["queue"], dead["attempt"], dead["max_attempts"]) == (
        FAIL, "emails", 2, 2
    )  # fmt: skip
    assert dead["error"] == "ValueError: kaput" and dead["worker"] in ("w1", "w2")
    done = [d for d in documents if d["outcome"] == "completed"]
    assert {d["task"] for d in done} == {ADD, "tests.django.tasks.nap"}
    assert all(d["duration_ms"] >= 0 for d in done)
    assert all(d["time"] and d["id"] for d in documents)

    wait_until(lambda: len(failures.lines()) >= 2, timeout=30)
    assert failures.stop(signal.SIGINT) == 0  # Ctrl-C: a clean end, no traceback
    lines = failures.lines()
    assert all(failing.id in line and " queue=emails " in line for line in lines), lines
    assert [line.split()[1] for line in lines] == ["retried", "dead"]
    assert "error='ValueError: kaput'" in lines[-1] and "Traceback" not in failures.err.read_text()


def test_an_operators_action_is_an_event(echomq, tmp_path):
    jobs: Jobs = conf.get_jobs()
    job_id = jobs.enqueue("default", NewJob(payload="{}", task=ADD)).id
    cursors = {"default": "0-0"}
    echomq_cmd("cancel", job_id)
    echomq_cmd("retry", job_id)
    echomq_cmd("delete", job_id)
    got = [e.as_dict() for e in events.read(jobs.connector, cursors, 100)]
    assert [(e["job_id"], e["outcome"]) for e in got] == [
        (job_id, "cancelled"), (job_id, "requeued"), (job_id, "deleted")
    ]  # fmt: skip
    assert all(e["worker"].startswith("cli@") for e in got)


def test_the_stream_is_capped(echomq):
    """One entry per flush, about ``kept`` entries kept (trimmed in whole nodes)."""
    jobs: Jobs = conf.get_jobs()
    log = events.EventLog(kept=100)
    for n in range(1000):
        log.add("default", ["x" if name == "outcome" else str(n) for name in events.STREAM_FIELDS])
        jobs.connector.run_many(log.take())
    assert 100 <= jobs.connector.client.xlen(QueueKeys.of("default").events) < 300
