"""``runworker`` and ``runreaper``: the management commands, as processes and in-process."""

from __future__ import annotations

import signal
import time

import django
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from echomq_django import management
from echomq_django.compat import TaskResultStatus
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.management.commands import runreaper, runworker
from tests.support.waiting import wait_until
from tests.worker import settings as worker_settings
from tests.worker import tasks

pytestmark = pytest.mark.django_db
DUMMY_BACKEND = (
    "django.tasks.backends.dummy.DummyBackend"
    if django.VERSION >= (6, 0)
    else "django_tasks.backends.dummy.DummyBackend"  # the backport on Django 5.2
)


def test_runworker_burst_runs_django_tasks_end_to_end(django_jobs, valkey_url, spawn):
    added, failed, napped = (
        tasks.add.enqueue(2, 3),
        tasks.boom.enqueue("x"),
        tasks.nap.enqueue(0.05),
    )
    worker = spawn("runworker", valkey_url, "default", "slow", "--burst", "--name", "e2e")
    assert worker.wait(30) == 0, worker.log()
    for result in (added, failed, napped):
        result.refresh()
    assert (added.status, added.return_value, added.worker_ids) == (
        TaskResultStatus.SUCCESSFUL, 5, ["e2e"],
    )  # fmt: skip
    assert (failed.status, failed.attempts) == (TaskResultStatus.FAILED, 2)
    assert failed.errors[0].exception_class_path == "builtins.ValueError"
    assert (napped.status, napped.return_value) == (TaskResultStatus.SUCCESSFUL, 0.05)
    log = worker.log()
    assert f"on {valkey_url} (valkey " in log and "queues default, slow" in log
    assert f"job {added.id} tests.worker.tasks.add completed" in log


@pytest.mark.parametrize(
    ("seconds", "grace", "outcome"), [(0.8, "5", "completed"), (30, "0.5", "active")]
)
def test_sigterm_finishes_the_running_job_or_leaves_it_to_the_reaper_and_exits_0(
    django_jobs, valkey_url, spawn, tmp_path, seconds, grace, outcome
):
    started = tmp_path / "started"
    result = tasks.nap.enqueue(seconds, str(started))
    worker = spawn("runworker", valkey_url, "slow", "--grace", grace, "--lease", "1")
    wait_until(started.exists, timeout=15)
    signalled = time.monotonic()
    worker.send(signal.SIGTERM)
    assert worker.wait(float(grace) + 5) == 0, worker.log()
    assert time.monotonic() - signalled < float(grace) + 3  # slack for a loaded CI machine
    job = django_jobs.get("slow", result.id)
    assert job.state == outcome
    if outcome == "active":
        # Its thread still ran at the end of the grace time: releasing it then would let
        # another worker start it beside. Left to the reaper: back after the lease, free.
        wait_until(lambda: django_jobs.reap("slow").moved == 1, timeout=10)
        job = django_jobs.get("slow", result.id)
        assert (job.state, job.attempts, job.refunds, job.error_list) == ("pending", 1, 1, [])
        assert (job.solo, job.crashes) == (False, 0)  # a stop, not a crash: nothing changes


def test_sigterm_past_the_grace_kills_a_solo_jobs_child_and_releases_it_free(
    django_jobs, valkey_url, spawn, tmp_path
):
    """A solo job runs in a child of its own, which a stop can kill: the job goes back at
    once, charged nothing, however many deploys cut it (it used to be left to the reaper,
    which took each loss for a crash of its worker and ended it dead after three)."""
    started = tmp_path / "started"
    result = tasks.nap.enqueue(30, str(started))
    django_jobs.connector.client.hset(QueueKeys.of("slow").job(result.id), "solo", "1")
    for deploy in range(4):
        started.unlink(missing_ok=True)
        worker = spawn("runworker", valkey_url, "slow", "--grace", "0.5", "--lease", "30")
        wait_until(started.exists, timeout=15)
        worker.send(signal.SIGTERM)
        assert worker.wait(10) == 0, worker.log()
        job = django_jobs.get("slow", result.id)
        assert (job.state, job.crashes, job.refunds) == ("pending", 0, deploy + 1), worker.log()
        assert "killed the child running 1 job(s)" in worker.log()
    row = django_jobs.connector.client.hgetall(QueueKeys.of("slow").job(result.id))
    assert (row["solo"], row.get("lost_isolated", "0")) == ("1", "0")


@pytest.mark.parametrize("mode", [[], ["--processes", "1"]], ids=["threads", "processes"])
def test_a_task_sees_its_worker_stopping_through_its_context(
    django_jobs, valkey_url, spawn, tmp_path, mode
):
    """A long task can save its progress and return once a stop is asked, within the
    grace, instead of being cut at its end (issue 15: the context says so)."""
    started = tmp_path / "started"
    result = tasks.until_stopped.enqueue(str(started))
    worker = spawn("runworker", valkey_url, "slow", "--grace", "20", *mode)
    wait_until(started.exists, timeout=15)
    worker.send(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.log()
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, "stopped early")


def test_a_second_signal_exits_at_once_and_leaves_the_job_to_the_reaper(
    django_jobs, valkey_url, spawn, tmp_path
):
    started = tmp_path / "started"
    result = tasks.nap.enqueue(30, str(started))
    worker = spawn("runworker", valkey_url, "slow", "--grace", "30")
    wait_until(started.exists, timeout=15)
    worker.send(signal.SIGINT)
    time.sleep(0.2)
    worker.send(signal.SIGINT)
    assert worker.wait(5) == 128 + signal.SIGINT, worker.log()
    assert django_jobs.get("slow", result.id).state == "active"
    # The first Ctrl-C's line says what a graceful stop waits for, and how long.
    assert "running ones get up to 30s to finish; send it again (Ctrl-C)" in worker.log()


def test_a_solo_job_in_its_child_holds_one_slot_not_the_worker(
    django_jobs, valkey_url, spawn, tmp_path
):
    """A solo job (back from a worker's death) runs in a child of its own: the other
    slots go on claiming and running jobs meanwhile (the worker used to claim nothing
    until it ended, every queue idle behind one long job)."""
    started = tmp_path / "started"
    slow = tasks.nap.enqueue(30, str(started))
    django_jobs.connector.client.hset(QueueKeys.of("slow").job(slow.id), "solo", "1")
    worker = spawn(
        "runworker", valkey_url, "default", "slow", "--concurrency", "4", "--grace", "0.5"
    )
    wait_until(started.exists, timeout=15)
    quick = [tasks.add.enqueue(i, 1) for i in range(20)]
    wait_until(
        lambda: all(django_jobs.get("default", r.id).state == "completed" for r in quick),
        timeout=15,
    )
    assert django_jobs.get("slow", slow.id).state == "active"  # still running, alone
    worker.send(signal.SIGTERM)
    assert worker.wait(10) == 0, worker.log()


def test_a_worker_started_with_sigint_ignored_keeps_it_so_and_stops_on_sighup(
    django_jobs, valkey_url, spawn, tmp_path
):
    """A shell starts a background job (`runworker &` in a script) with SIGINT ignored: a
    Ctrl-C meant for the shell must not stop it. SIGHUP (its terminal closed) is a stop
    like SIGTERM, said in the log, not a silent death."""
    started = tmp_path / "started"
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited by the child
    # ... and SIGHUP as a terminal leaves it: a suite started with nohup ignores it, and
    # the worker would keep that ignore too (as it should, under nohup).
    hup_before = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        worker = spawn("runworker", valkey_url, "slow", "--grace", "5")
    finally:
        signal.signal(signal.SIGINT, before)
        signal.signal(signal.SIGHUP, hup_before)
    result = tasks.nap.enqueue(0.3, str(started))
    wait_until(started.exists, timeout=15)
    worker.send(signal.SIGINT)
    wait_until(lambda: django_jobs.get("slow", result.id).state == "completed", timeout=10)
    second = tasks.nap.enqueue(0.1)
    wait_until(lambda: django_jobs.get("slow", second.id).state == "completed", timeout=10)
    assert worker.popen.poll() is None and "SIGINT" not in worker.log()
    worker.send(signal.SIGHUP)
    assert worker.wait(30) == 0, worker.log()  # (a busy machine: the stop is awaited)
    assert "SIGHUP: stopping" in worker.log()


def test_runreaper_once_sweeps_configured_and_discovered_queues(django_jobs):
    from tests.worker.test_reaper import expire_lease

    (lost,) = expire_lease(django_jobs, "only-in-data")
    call_command("runreaper", "--once", verbosity=0)
    assert django_jobs.get("only-in-data", lost).state == "pending"


def test_runreaper_exits_0_on_sigterm(django_jobs, valkey_url, spawn):
    reaper = spawn("runreaper", valkey_url, "--interval", "0.05")
    wait_until(lambda: "reaper on" in reaper.log(), timeout=15)
    reaper.send(signal.SIGTERM)
    assert reaper.wait(5) == 0, reaper.log()


def test_the_reaper_finds_queues_in_settings(settings):
    settings.ECHOMQ = {"QUEUES": ["reports"]}
    settings.TASKS = {
        **worker_settings.TASKS,
        "other": {"BACKEND": DUMMY_BACKEND, "QUEUES": ["not-ours"]},
    }
    assert management.configured_queues() == ["reports", "default", "emails", "slow"]


@pytest.mark.parametrize(
    "argv",
    [["bad name"], ["--concurrency", "0"], ["--lease", "-1"], ["--name", "has space"]],
)
def test_runworker_refuses_bad_arguments(django_jobs, argv):
    with pytest.raises(CommandError):
        call_command("runworker", *argv, verbosity=0)


@pytest.mark.parametrize(
    "argv",
    [["--crash-budget", "0"], ["--crash-budget", "-1"], ["--crash-budget", "2000000"],
     ["--crash-budget", "x"], ["--interval", "0"], ["bad name"]],
)  # fmt: skip
def test_runreaper_refuses_bad_arguments_before_it_starts(django_jobs, argv):
    """Not a reaper that starts, looks healthy and fails every tick."""
    with pytest.raises(CommandError):
        call_command("runreaper", "--once", *argv, verbosity=0)


@pytest.mark.parametrize(
    ("command", "options"),
    [
        (runworker.Command, ["--concurrency", "--burst", "--max-jobs", "--lease", "--name",
                             "--grace", "--retry-base", "--retry-max", "QUEUE"]),
        (runreaper.Command, ["--interval", "--once", "QUEUE"]),
    ],
)  # fmt: skip
def test_every_option_has_help(command, options):
    parser = command().create_parser("manage.py", command.__module__.rsplit(".", 1)[1])
    text = parser.format_help()
    for option in options:
        assert option in text
    for action in parser._actions:
        assert action.help, f"{action.dest} has no help text"


def test_the_start_up_banner_masks_the_password(acl_server, spawn):
    worker = spawn("runworker", acl_server.url, "--burst")
    assert worker.wait(30) == 0, worker.log()
    log = worker.log()
    assert acl_server.password not in log
    assert f"on redis://{acl_server.username}:***@" in log


def test_concurrency_has_its_short_form():
    """`-c 4`, as the README and Celery users write it."""
    from echomq_django.management.commands.runworker import Command

    parser = Command().create_parser("manage.py", "runworker")
    assert parser.parse_args(["-c", "4"]).concurrency == 4
