"""``runworker default:1 slow:1``: per-queue shares of a worker's slots, as processes.

Four slow jobs in ``slow`` run until the test releases them; a job enqueued to
``default`` meanwhile completes when ``default`` has a slot of its own, and waits
behind them when the slots are shared.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from echomq_django.compat import TaskResultStatus
from tests.support.waiting import wait_until
from tests.worker import tasks

pytestmark = pytest.mark.django_db


def slow_jobs(tmp_path, n=4):
    started, release = tmp_path / "started", tmp_path / "release"
    started.mkdir()
    results = [tasks.hold.enqueue(str(started), str(release)) for _ in range(n)]
    return started, release, results


def test_a_sized_queue_runs_beside_slow_jobs_of_another(django_jobs, valkey_url, spawn, tmp_path):
    started, release, slow = slow_jobs(tmp_path)
    worker = spawn("runworker", valkey_url, "default:1", "slow:1", "--name", "shares")
    wait_until(lambda: any(started.iterdir()), timeout=15)
    quick = tasks.add.enqueue(2, 3)
    wait_until(lambda: (quick.refresh(), quick.status)[1] == TaskResultStatus.SUCCESSFUL,
               timeout=15)  # fmt: skip
    assert quick.return_value == 5
    assert len(list(started.iterdir())) == 1  # slow's one slot: its other jobs still wait
    assert [django_jobs.get("slow", r.id).state for r in slow].count("active") == 1
    assert "queues default:1, slow:1, concurrency 2" in worker.log()
    release.touch()
    for result in slow:
        wait_until(lambda r=result: (r.refresh(), r.status)[1] == TaskResultStatus.SUCCESSFUL,
                   timeout=30)  # fmt: skip
    assert len(list(started.iterdir())) == 4


def test_with_shared_slots_the_quick_job_waits_behind_the_slow_ones(
    django_jobs, valkey_url, spawn, tmp_path
):
    started, release, slow = slow_jobs(tmp_path)
    spawn("runworker", valkey_url, "slow", "default", "--concurrency", "1")
    wait_until(lambda: any(started.iterdir()), timeout=15)
    quick = tasks.add.enqueue(2, 3)
    # Give the worker time it would need to run it (the sized test above does it in
    # this time): it cannot, its one slot is held.
    with pytest.raises(pytest.fail.Exception):
        wait_until(lambda: (quick.refresh(), quick.status)[1] != TaskResultStatus.READY,
                   timeout=3, step=0.05)  # fmt: skip
    assert django_jobs.get("default", quick.id).state == "pending"
    release.touch()
    wait_until(lambda: (quick.refresh(), quick.status)[1] == TaskResultStatus.SUCCESSFUL,
               timeout=30)  # fmt: skip
    assert all(django_jobs.get("slow", r.id).state == "completed" for r in slow)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["default:0"], "at least 1"),
        (["default:x"], "QUEUE:N"),
        (["default:4:2"], "QUEUE:N"),
        (["default:-1"], "QUEUE:N"),
        (["default:٣"], "QUEUE:N"),  # a digit, but not an ASCII one
        (["default:"], "QUEUE:N"),
        (["default:2", "default"], "named twice: default"),
        (["déf:2"], "invalid queue name"),
        ([":2"], "must not be empty"),
        (["default:2", "slow"], "give --concurrency"),
        (["default:2", "slow", "--concurrency", "2"], "leaving none for slow"),
        (["default:2", "slow:1", "--concurrency", "4"], "add up to 3 slot(s) but the worker has 4"),
        (["default:3", "--processes", "2"], "cannot share evenly"),
    ],
)
def test_runworker_refuses_ill_formed_queue_sizes(django_jobs, argv, message):
    keys_before = django_jobs.connector.client.dbsize()
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call_command("runworker", *argv, "--burst", verbosity=0)
    assert django_jobs.connector.client.dbsize() == keys_before  # nothing changed
