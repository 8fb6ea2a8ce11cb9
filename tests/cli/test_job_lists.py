"""``echomq jobs``, ``echomq workers`` (each worker's jobs and their run time), ``echomq retry``."""

from __future__ import annotations

import json
import time

import pytest
from django.core.management.base import CommandError

from echomq_django.engine import registry
from echomq_django.engine.jobs import NewJob
from tests.cli.conftest import echomq_cmd, enqueue, make_completed, make_dead


def test_jobs_lists_a_place_with_completed_and_dead_newest_first(jobs):
    first, second, third = (make_completed(jobs)[0] for _ in range(3))
    listed = echomq_cmd("jobs", "default", "completed", "--json").json()
    assert (listed["queue"], listed["state"], listed["total"]) == ("default", "completed", 3)
    assert [j["id"] for j in listed["jobs"]] == [third, second, first]
    assert listed["jobs"][0]["task"] == "tests.task"
    # Typed as `inspect --json` types them: `jq 'select(.max_attempts > 3)'` compares numbers.
    numbers = ("attempts", "refunds", "max_attempts", "enqueued_at", "finished_at")
    assert all(type(j[name]) is int for j in listed["jobs"] for name in numbers), listed["jobs"]
    oldest = echomq_cmd("jobs", "default", "completed", "--oldest-first", "--json").json()
    assert [j["id"] for j in oldest["jobs"]] == [first, second, third]
    table = echomq_cmd("jobs", "default", "completed").out
    assert third in table and "3 shown of 3 · newest first" in table


def test_jobs_pending_in_run_order_limited_and_filtered_by_task(jobs):
    ids = enqueue(jobs, "default", 5)
    other = jobs.enqueue("default", NewJob(payload="{}", task="other.task")).id
    assert [j["id"] for j in echomq_cmd("jobs", "default", "pending", "--limit", "2", "--json")
            .json()["jobs"]] == ids[:2]  # fmt: skip
    only = echomq_cmd("jobs", "default", "pending", "--task", "other.task", "--json").json()
    assert (only["total"], [j["id"] for j in only["jobs"]]) == (1, [other])
    assert (
        echomq_cmd("jobs", "default", "pending", "--task", "nothing", "--json").json()["jobs"] == []
    )


@pytest.mark.parametrize(
    "args", [["default", "ready"], ["no{pe", "dead"], ["default", "dead", "--limit", "0"]]
)
def test_jobs_refuses_bad_arguments(jobs, args):
    with pytest.raises(CommandError):
        echomq_cmd("jobs", *args)


def test_workers_show_each_running_job_and_how_long_it_has_run(jobs, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")  # one line per row, to read the cells back
    (job_id,) = enqueue(jobs, "emails", 1)
    claimed = jobs.claim("emails", "w-run", lease_ms=60_000, start_now=1).jobs[0]
    jobs.extend("emails", claimed.id, claimed.token, 60_000, ran_us=3_000_000)  # began 3 s ago
    now = time.time()
    registry.heartbeat(
        jobs.connector,
        registry.WorkerInfo(
            id="w-run",
            host="box-1",
            pid=7,
            queues=["default", "emails"],
            concurrency=2,
            running=[job_id],
            started_at=now - 60,
            last_seen=now,
        ),
        ttl_s=30,
    )
    (listed,) = echomq_cmd("workers", "--json").json()
    (held,) = listed["jobs"]
    assert (held["id"], held["queue"], held["task"], held["attempt"]) == (
        job_id, "emails", "tests.task", 1
    )  # fmt: skip
    assert 3 <= held["running_s"] < 3 + 30  # 30 s: a very slow machine between the calls
    table = echomq_cmd("workers").out
    (line,) = [line for line in table.splitlines() if job_id in line]
    assert [cell.strip() for cell in line.strip("│ ").split("│")][1:] == [
        "tests.task", "emails", "1", f"{int(held['running_s'])}s", "w-run"
    ]  # fmt: skip


def test_retry_one_dead_job(jobs):
    dead, other = make_dead(jobs, n=2)
    assert echomq_cmd("retry", dead, "--json").json() == {
        "id": dead, "queue": "default", "outcome": "pending"
    }  # fmt: skip
    assert jobs.get("default", dead).state == "pending"
    assert jobs.get("default", other).state == "dead"
    with pytest.raises(CommandError, match="is pending, not dead"):
        echomq_cmd("retry", dead)


def test_retry_of_a_dead_job_whose_key_is_held_says_why_it_stays_dead(jobs):
    held_by = jobs.enqueue("default", NewJob(payload="{}", idempotency_key="k")).id
    (c,) = jobs.claim("default", "w").jobs
    jobs.retry("default", c.id, c.token, error='{"exception_class_path": "x"}', summary="x",
               give_up=True)  # fmt: skip
    newer = jobs.enqueue("default", NewJob(payload="{}", idempotency_key="k")).id
    with pytest.raises(CommandError, match=f"stays dead: .*held by live job {newer}"):
        echomq_cmd("retry", held_by)
    assert jobs.get("default", held_by).state == "dead"


def test_a_cancel_counts_as_cancelled_not_as_failed(jobs):
    make_dead(jobs)  # a real failure beside it
    (waiting,) = enqueue(jobs, "default", 1)
    jobs.cancel("default", waiting)
    (stats,) = [s for s in echomq_cmd("stats", "--json").json() if s["queue"] == "default"]
    assert {k: stats["events"][k] for k in ("failed", "dead", "cancelled")} == {
        "failed": 1,
        "dead": 2,
        "cancelled": 1,
    }
    from echomq_django.metrics import queue_families
    from echomq_django.queue_totals import queue_stats

    families = queue_families(queue_stats(jobs, ["default"])[0])
    (failed,) = [f for f in families if f.name == "echomq_failed_total"]
    assert failed.samples == [({"queue": "default"}, 1)]


def test_inspect_prints_tracebacks_below_the_table_unfolded(jobs):
    (job_id,) = enqueue(jobs, "default", 1, max_attempts=1)
    (claimed,) = jobs.claim("default", "w1", lease_ms=1000).jobs
    long_line = '  File "/srv/app/' + "deep/" * 30 + 'tasks.py", line 7, in charge'
    error = json.dumps({"exception_class_path": "builtins.ValueError", "traceback": long_line})
    jobs.retry("default", job_id, claimed.token, error=error, summary="ValueError: boom")
    out = echomq_cmd("inspect", job_id).out
    assert long_line in out.splitlines()  # one line, as written: copyable, not folded at 80
    assert "error 1: builtins.ValueError" in out
