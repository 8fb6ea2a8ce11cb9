"""Rows planted straight into the server: dead-lettered with a reason, never executed.

Anyone with write access to the server can plant a row. The real worker with
the real Django handler (``execution.execute``) must dead-letter each bad row
with a reason that says what is wrong, drop ids whose row is gone (repairing
the set), keep running (a good job next to them completes), and never import or
call what a row names: the bait module ``tests.security.evil`` leaves a marker
file if it is imported or any of its functions runs.
"""

from __future__ import annotations

import json
import sys
import threading

import pytest

from echomq_django import conf
from echomq_django.engine.keyspace import QueueKeys, new_job_id
from echomq_django.engine.worker import Worker
from echomq_django.execution import execute
from tests.chaos import snapshot
from tests.django.tasks import echo

Q = "default"
KEYS = QueueKeys.of(Q)


def payload(task: str = "tests.django.tasks.add", **changes) -> str:
    data = {"v": 1, "task": task, "args": [1, 2], "kwargs": {}, "backend": "default"}
    data.update(changes)
    return json.dumps(data)


def good_row(job_id: str, **fields) -> dict[str, str]:
    row = {
        "id": job_id, "state": "pending", "payload": payload(), "task": "t", "priority": "0",
        "attempts": "0", "refunds": "0", "max_attempts": "3", "lease_ms": "0",
    }  # fmt: skip
    row.update(fields)
    return {k: v for k, v in row.items() if v is not None}


# name -> (row fields changed from a good row, words the dead row's last_error must contain)
PLANTED: dict[str, tuple[dict[str, str | None], str]] = {
    "no payload": ({"payload": None}, "no 'payload' field"),
    "no id field": ({"id": None}, ""),  # the key names the job: the row is readable
    "another job's id": ({"id": "01900000-0000-7000-8000-00000000000a"}, ""),
    "payload not JSON": ({"payload": "\x80{not json"}, "not JSON"),
    "payload not an object": ({"payload": "[1, 2]"}, "not a version 1"),
    "payload of another version": ({"payload": payload(v=2)}, "not a version 1"),
    "args of the wrong type": ({"payload": payload(args={"a": 1})}, "wrong type"),
    "attempts not an integer": ({"attempts": "many"}, "attempts is not an integer"),
    "priority not an integer": ({"priority": "high"}, "'priority' is not an integer"),
    "unconfigured backend": ({"payload": payload(backend="nope")}, "not configured"),
    "os.system": ({"payload": payload("os.system", args=["touch /tmp/echomq-pwned"])}, "os.system"),
    "subprocess.run": ({"payload": payload("subprocess.run", args=[["true"]])}, "subprocess.run"),
    "builtins.exec": ({"payload": payload("builtins.exec", args=["1"])}, "builtins.exec"),
    "function in an unloaded module": (
        {"payload": payload("tests.security.evil.write_marker")},
        "not a Task object",
    ),
    "task in an unloaded module": (
        {"payload": payload("tests.security.evil.evil_task")},
        "not a Task object",
    ),
}


@pytest.fixture
def marker(tmp_path, monkeypatch):
    path = tmp_path / "evil-marker"
    monkeypatch.setenv("ECHOMQ_EVIL_MARKER", str(path))
    return path


def run_burst_worker(jobs) -> Worker:
    worker = Worker(jobs, [Q], execute, concurrency=2, lease_ms=2000, burst=True)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the burst worker did not finish: a bad row wedged it"
    return worker


def test_planted_rows_are_dead_lettered_and_never_run(echomq, marker):
    raw = echomq
    jobs = conf.get_jobs()
    jobs.register_queue(Q)
    planted = {}
    for i, (name, (fields, _)) in enumerate(PLANTED.items()):
        job_id = new_job_id()
        raw.hset(KEYS.job(job_id), mapping=good_row(job_id, **fields))
        raw.zadd(KEYS.pending, {job_id: i})
        planted[name] = job_id
    dangling = new_job_id()
    raw.zadd(KEYS.pending, {dangling: 0})  # an id whose row is gone
    raw.hset(KEYS.job_prefix + "not-an-id", mapping=good_row("not-an-id"))
    raw.zadd(KEYS.pending, {"not-an-id": 0})  # a member no job id can be
    good = echo.enqueue("still", "works")

    worker = run_burst_worker(jobs)

    assert jobs.get(Q, good.id).state == "completed", "a good job next to bad rows must run"
    for name, job_id in planted.items():
        state = raw.hget(KEYS.job(job_id), "state").decode()
        last_error = (raw.hget(KEYS.job(job_id), "last_error") or b"").decode()
        expected = PLANTED[name][1]
        if name in ("no id field", "another job's id"):
            row = jobs.get(Q, job_id)  # runnable once the key's id is restored: it ran
            assert (row.state, row.id) == ("completed", job_id)
            continue
        assert state == "dead", f"{name}: {state}"
        assert expected in last_error, f"{name}: {last_error!r}"
        assert raw.hget(KEYS.job(job_id), "attempts") in (b"1", b"many"), f"{name} was retried"
    assert not raw.zscore(KEYS.pending, dangling), "the dangling id is dropped from pending"
    assert not raw.zscore(KEYS.pending, "not-an-id"), "a malformed id is dropped from pending"
    orphan = KEYS.job_prefix + "not-an-id"  # unreachable now: never claimed, left as planted
    assert raw.hmget(orphan, "state", "attempts") == [b"pending", b"0"]
    raw.delete(orphan)
    assert not snapshot.places(raw, Q)
    assert not marker.exists(), marker.read_text()
    assert "tests.security.evil" not in sys.modules
    assert worker.stats.completed == 3
