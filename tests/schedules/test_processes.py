"""Real ``runreaper`` processes racing over a one-second schedule, and one SIGKILLed.

The reapers are configured as a deployment is (``tests.support.deployed_settings``: the
whole ECHOMQ dict, SCHEDULES included, comes from the environment). No worker runs:
every job a tick enqueued stays pending, so the pending set is the record of what
fired. A job's tick is its id's UUIDv7 timestamp.
"""

from __future__ import annotations

import itertools
import json
import signal
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from echomq_django.engine.jobs import Jobs
from echomq_django.engine.scheduler import Scheduler
from tests.support import procs

from .conftest import tick_of

pytestmark = pytest.mark.slow
TASK = "tests.django.tasks.add"


def settings_env(url: str, schedules: dict[str, Any]) -> dict[str, str]:
    echomq = {"URL": url, "QUEUES": ["default"], "SCHEDULES": schedules}
    return {"DJANGO_SETTINGS_MODULE": "tests.support.deployed_settings",
            "ECHOMQ_TEST_SETTINGS": json.dumps(echomq)}  # fmt: skip


def start_reaper(url: str, schedules: dict[str, Any], log_dir: Path) -> procs.Proc:
    return procs.start("runreaper", url, log_dir=log_dir, **settings_env(url, schedules))


def wait_for(predicate, timeout: float, what: str, reapers=()):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            logs = "\n".join(r.log()[-2000:] for r in reapers)
            pytest.fail(f"{what}: not within {timeout}s\n{logs}")
        time.sleep(0.05)
    return value


def pending_ticks(jobs: Jobs, name: str) -> dict[int, list[str]]:
    """tick -> the ids of the pending jobs enqueued for it by schedule ``name``."""
    found: dict[int, list[str]] = {}
    page = jobs.page("default", "pending", count=500, fields=("task",))
    for entry in page.entries:
        found.setdefault(tick_of(entry.id), []).append(entry.id)
    return found


def stop(reapers: list[procs.Proc]) -> list[int]:
    """SIGTERM each live reaper once; their exit codes (0: a graceful stop)."""
    for r in reapers:
        if r.popen.poll() is None:
            r.send(signal.SIGTERM)
    return [r.wait(20) for r in reapers]


def test_two_then_three_reapers_fire_each_tick_exactly_once(
    connector, url, tmp_path, record_property
):
    jobs, scheduler = Jobs(connector), Scheduler(Jobs(connector))
    schedules = {"race": {"task": TASK, "every": 1, "args": [1, 1], "catch_up": "all",
                          "overlap": "allow"}}  # fmt: skip
    reapers = [start_reaper(url, schedules, tmp_path) for _ in range(2)]
    try:
        first = min(wait_for(lambda: pending_ticks(jobs, "race"), 60, "a first tick", reapers))
        wait_for(lambda: max(pending_ticks(jobs, "race")) >= first + 4000, 20, "4 s", reapers)
        reapers.append(start_reaper(url, schedules, tmp_path))
        wait_for(lambda: "reaper on" in reapers[-1].log(), 60, "the third reaper", reapers)
        third = max(pending_ticks(jobs, "race"))
        wait_for(lambda: max(pending_ticks(jobs, "race")) >= third + 4000, 20, "4 s", reapers)
    finally:
        codes = stop(reapers)
    assert codes == [0, 0, 0], [r.log()[-2000:] for r in reapers]
    ticks = pending_ticks(jobs, "race")
    span = list(range(min(ticks), max(ticks) + 1000, 1000))
    assert sorted(ticks) == span  # none missing, none outside the grid
    assert all(len(ids) == 1 for ids in ticks.values())  # one job per tick
    assert jobs.stats("default").metrics["enqueued"] == len(span)  # nothing enqueued twice
    (record,) = scheduler.read("default")[1]
    assert (record.counter("fired"), record.counter("missed")) == (len(span), 0)
    assert max(ticks) >= third + 4000 and len(span) >= 9
    late = [int(jobs.get("default", ids[0]).enqueued_at) // 1000 - t for t, ids in ticks.items()]
    record_property("lateness_ms", {"median": statistics.median(late), "max": max(late)})
    assert statistics.median(late) < 250  # woken by the next fire time, not by a 1 s poll


def test_a_reaper_killed_and_restarted_after_5_s_catches_up_as_each_schedule_says(
    valkey_server, tmp_path, record_property
):
    from echomq_django.engine.connector import Connector

    valkey_server.command("FLUSHALL")
    connector = Connector.from_url(valkey_server.url)
    jobs, scheduler = Jobs(connector), Scheduler(Jobs(connector))
    schedules = {
        "latest": {"task": TASK, "every": 1, "args": [1, 0], "overlap": "allow"},
        "all": {"task": TASK, "every": 1, "args": [2, 0], "overlap": "allow", "catch_up": "all"},
    }
    reaper = start_reaper(valkey_server.url, schedules, tmp_path)

    def records() -> dict[str, Any]:
        return {s.name: s for s in scheduler.read("default")[1]}

    try:
        wait_for(lambda: all(r.counter("fired") >= 2 for r in records().values()) and records(),
                 60, "two ticks each", [reaper])  # fmt: skip
        reaper.kill()  # SIGKILL mid-run
        before = {n: r.last_tick for n, r in records().items()}
        time.sleep(5)
        reaper = start_reaper(valkey_server.url, schedules, tmp_path)
        wait_for(lambda: all(r.last_tick >= before[n] + 6000 for n, r in records().items()),
                 60, "the restarted reaper's fires", [reaper])  # fmt: skip
    finally:
        (code,) = stop([reaper])
    assert code == 0, reaper.log()[-3000:]
    fired: dict[str, list[int]] = {"latest": [], "all": []}
    by_id = {}
    for entry in jobs.page("default", "pending", count=500, fields=("payload",)).entries:
        name = "latest" if '"args":[1,0]' in entry.fields["payload"] else "all"
        fired[name].append(tick_of(entry.id))
        by_id[entry.id] = name
    final = records()
    # all: every tick from the first to the last has its job, the 5 s without a reaper too.
    ticks = sorted(fired["all"])
    assert ticks == list(range(ticks[0], ticks[-1] + 1000, 1000))
    assert final["all"].counter("missed") == 0
    # latest: the ticks of the outage are missed (counted), except the latest, fired once.
    ticks = sorted(fired["latest"])
    gaps = [b - a for a, b in itertools.pairwise(ticks) if b - a > 1000]
    assert len(gaps) == 1 and gaps[0] >= 5000, ticks
    assert final["latest"].counter("missed") == gaps[0] // 1000 - 1
    assert final["latest"].counter("fired") == len(ticks) and len(set(ticks)) == len(ticks)
    record_property("latest_missed", final["latest"].counter("missed"))
    connector.close()
