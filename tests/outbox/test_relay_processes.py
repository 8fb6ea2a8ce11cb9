"""Relays as real processes on a real database (a SQLite file, and PostgreSQL): racing,
killed between their send and their delete, and the whole path from a view to a worker."""

from __future__ import annotations

import json
import signal
import time

import pytest

from echomq_django import conf
from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs

# Each bound is many times what the step takes on an idle machine (a second or less):
# the margin is for a 2-core machine shared with other test runs.
DEADLINE_S = 60.0


def await_condition(check, what: str, timeout: float = DEADLINE_S, logs=None) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout}s\n{logs() if logs else ''}")
        time.sleep(0.02)


@pytest.fixture
def server_jobs(url):
    jobs = Jobs(Connector.from_url(url))
    yield jobs
    jobs.connector.close()


def stored_ids(jobs: Jobs, queue: str = "default") -> list[str]:
    total = jobs.stats(queue).counts["pending"]
    ids: list[str] = []
    while len(ids) < total:
        ids += [e.id for e in jobs.page(queue, "pending", offset=len(ids), count=500).entries]
    return ids


def test_two_relays_racing_over_5000_rows_enqueue_each_once(child, server_jobs, tmp_path):
    child.run("tests.outbox.proc", "seed", "5000", str(tmp_path / "ids"))
    seeded = (tmp_path / "ids").read_text().split()
    assert len(seeded) == 5000 and child.db.outbox() == 5000

    go = tmp_path / "go"
    relays = [
        child.start(
            *("tests.outbox.proc", "relay", str(tmp_path / f"report-{n}"), "--batch", "100"),
            *("--ready", str(tmp_path / f"ready-{n}"), "--go", str(go)),
        )
        for n in (1, 2)
    ]
    await_condition(
        lambda: all((tmp_path / f"ready-{n}").exists() for n in (1, 2)),
        "both relays ready",
        logs=child.logs,
    )
    go.write_text("go")
    for relay in relays:
        assert relay.wait(DEADLINE_S) == 0, child.logs()
    reports = [json.loads((tmp_path / f"report-{n}").read_text()) for n in (1, 2)]

    # No row was taken by both: every row was sent by exactly one relay, once.
    assert sum(r["relayed"] for r in reports) == 5000, reports
    assert [r["resent"] for r in reports] == [0, 0], reports
    stats = server_jobs.stats("default")
    assert (stats.counts["pending"], stats.metrics["enqueued"]) == (5000, 5000)
    assert sorted(stored_ids(server_jobs)) == sorted(seeded)
    assert child.db.outbox() == 0
    print(f"{child.db.kind}: relays took {[r['relayed'] for r in reports]} rows")


def test_a_relay_killed_after_its_send_and_before_its_delete_costs_nothing(
    child, server_jobs, tmp_path
):
    child.run("tests.outbox.proc", "seed", "20", str(tmp_path / "ids"))
    seeded = sorted((tmp_path / "ids").read_text().split())
    sent = tmp_path / "sent"
    doomed = child.start(
        "tests.outbox.proc", "relay", str(tmp_path / "never"),
        "--lease", "1", "--pause-after-send", str(sent),
    )  # fmt: skip
    await_condition(sent.exists, "the relay sent its batch", logs=child.logs)
    assert sorted(json.loads(sent.read_text())) == seeded
    assert server_jobs.stats("default").counts["pending"] == 20  # on the server...
    assert child.db.outbox() == 20  # ...and still in the outbox: the crash window
    doomed.send_signal(signal.SIGKILL)
    assert doomed.wait(10) == -signal.SIGKILL

    child.run("tests.outbox.proc", "relay", str(tmp_path / "report"))
    report = json.loads((tmp_path / "report").read_text())
    assert report == {"relayed": 20, "resent": 20}  # each re-send answered "exists"
    stats = server_jobs.stats("default")
    assert (stats.counts["pending"], stats.metrics["enqueued"]) == (20, 20)  # exactly once
    assert sorted(stored_ids(server_jobs)) == seeded
    assert child.db.outbox() == 0


def test_a_view_enqueueing_inside_atomic_reaches_a_real_worker(child, server_jobs):
    reaper = child.start("django", "runreaper", "--interval", "0.5")
    worker = child.start("django", "runworker", "default", "--name", "outbox-worker")
    started = time.monotonic()
    reply = json.loads(child.run("tests.outbox.proc", "view", "20", "22").splitlines()[-1])
    job_id = reply["job"]

    def done() -> bool:
        row = server_jobs.get("default", job_id)
        return row is not None and row.state == "completed"

    await_condition(done, "the job completed", logs=child.logs)
    print(f"{child.db.kind}: view to completed in {time.monotonic() - started:.2f}s")
    row = server_jobs.get("default", job_id)
    assert (json.loads(row.result), row.worker_ids) == (42, ("outbox-worker",))
    assert child.db.outbox() == 0
    assert child.db.query("SELECT name FROM auth_group") == [("order-20-22",)]
    for proc in (worker, reaper):
        proc.send_signal(signal.SIGTERM)
    for proc in (worker, reaper):
        assert proc.wait(DEADLINE_S) == 0, child.logs()
    assert "outbox relay on database 'default'" in child.logs()
    conf.reset()


def test_a_task_no_discovery_loads_still_has_its_outbox_rows_found_and_relayed(
    child, server_jobs, tmp_path, monkeypatch
):
    """A task in an app's other module (``myapp.jobs``) with ``enqueue_on_commit=
    "outbox"``, and nothing the discovery loads using the outbox. Before, its committed
    row waited for ever (runreaper started no relay) and get_result denied the job."""
    monkeypatch.setenv("ECHOMQ_TEST_OUTBOX_UNSEEN", "1")
    child.run("tests.outbox.proc", "seed-unseen", str(tmp_path / "ids"))
    job_id, status = (tmp_path / "ids").read_text().split()
    assert status == "READY" and child.db.outbox() == 1
    child.run("django", "runreaper", "--once")
    assert stored_ids(server_jobs) == [job_id] and child.db.outbox() == 0


def test_runreaper_once_drains_what_is_due(child, server_jobs, tmp_path):
    child.run("tests.outbox.proc", "seed", "3", str(tmp_path / "ids"))
    child.run("django", "runreaper", "--once")
    assert sorted(stored_ids(server_jobs)) == sorted((tmp_path / "ids").read_text().split())
    assert child.db.outbox() == 0
