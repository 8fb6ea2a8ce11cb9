"""``task_finished`` for a run ended outside the task's process.

A task's own process sends ``task_finished`` when the task returns or raises. A run
that never returns there has no one to send it: a child killed at its time limit, a
process that crashed. The worker that ended it sends it then, with the result as
stored (FAILED). Before, such tasks got ``task_started`` and never ``task_finished``
(one ``task_started`` per crashed attempt), so bookkeeping hung on the signal never
heard of the most important failures. A real ``runworker`` in each mode; the test
app writes every signal the worker's processes send to a file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import redis
from django.test import override_settings

from echomq_django import conf
from echomq_django.compat import TaskResultStatus
from tests.django import settings as echomq_settings
from tests.django.taskapp import jobs
from tests.django.test_contract import ROOT
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["processes", "threads"])
def test_a_task_killed_or_crashed_gets_one_task_finished(valkey_server, tmp_path, mode):
    redis.Redis.from_url(valkey_server.url).flushall()
    with override_settings(ECHOMQ={"URL": valkey_server.url}, TASKS=echomq_settings.TASKS):
        conf.reset()
        try:
            # Thread mode runs a task in a child of its own only once it came back solo:
            # its crash there is the case. The time limit's kill is process mode's.
            stuck = jobs.stuck.enqueue(30) if mode == "processes" else None
            dies = jobs.dies.enqueue(9)
            log = tmp_path / "signals.jsonl"
            env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.django.settings",
                   "ECHOMQ_TEST_URL": valkey_server.url, "ECHOMQ_SIGNAL_LOG": str(log)}  # fmt: skip
            extra = ["--processes", "1"] if mode == "processes" else ["--lease", "1"]
            argv = [sys.executable, "manage.py", "runworker", "default", "--burst",
                    "--concurrency", "1", "--crash-budget", "1", *extra]  # fmt: skip

            def work() -> subprocess.CompletedProcess:
                return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                                      timeout=120, check=False)  # fmt: skip

            proc = work()
            if mode == "threads":  # its first run took the worker down: back solo, then
                assert proc.returncode == 9, proc.stderr
                wait_until(lambda: conf.get_jobs().reap("default").moved, timeout=30)
                proc = work()  # in a child of its own, whose crash is charged: dead
            assert proc.returncode == 0, proc.stderr
            signals = [json.loads(line) for line in log.read_text().splitlines()]
            for result in (r for r in (stuck, dies) if r is not None):
                stored = result.task.get_result(result.id)
                assert stored.status == TaskResultStatus.FAILED
                finished = [
                    s for s in signals if s["id"] == result.id and s["signal"] == "finished"
                ]
                assert [s["status"] for s in finished] == [str(TaskResultStatus.FAILED)], signals
        finally:
            conf.reset()


def test_a_run_abandoned_in_its_thread_gets_one_task_finished_failed(valkey_server, tmp_path):
    """Thread mode: a run that swallows its soft stop is abandoned 2 s later and ends
    dead. Before, no task_finished came then, and when the thread returned at last it
    sent its own, SUCCESSFUL, for a job stored FAILED."""
    redis.Redis.from_url(valkey_server.url).flushall()
    with override_settings(ECHOMQ={"URL": valkey_server.url}, TASKS=echomq_settings.TASKS):
        conf.reset()
        try:
            stuck = jobs.swallows.enqueue(4.5)
            log = tmp_path / "signals.jsonl"
            env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.django.settings",
                   "ECHOMQ_TEST_URL": valkey_server.url, "ECHOMQ_SIGNAL_LOG": str(log)}  # fmt: skip
            argv = [sys.executable, "manage.py", "runworker", "default", "--concurrency", "1",
                    "--grace", "10"]  # fmt: skip
            out = tmp_path / "worker.log"
            with out.open("w") as err:
                worker = subprocess.Popen(argv, cwd=ROOT, env=env, stderr=err)
            try:
                wait_until(lambda: "after it was abandoned" in out.read_text(), timeout=30)
            finally:
                worker.terminate()
                worker.wait(30)
            assert stuck.task.get_result(stuck.id).status == TaskResultStatus.FAILED
            signals = [json.loads(line) for line in log.read_text().splitlines()]
            finished = [
                s["status"] for s in signals if s["id"] == stuck.id and s["signal"] == "finished"
            ]
            assert finished == [str(TaskResultStatus.FAILED)], signals
        finally:
            conf.reset()


def test_a_job_the_reaper_ends_dead_gets_one_task_finished(valkey_server, tmp_path):
    """A job that ran alone on a worker that died, past the crash budget: the reaper moves
    it to dead, and a real ``runreaper`` sends its ``task_finished`` (no process of the
    task is left to). Before, the result was FAILED and the signal never came."""
    redis.Redis.from_url(valkey_server.url).flushall()
    with override_settings(ECHOMQ={"URL": valkey_server.url}, TASKS=echomq_settings.TASKS):
        conf.reset()
        try:
            backend, engine = jobs.dies.get_backend(), conf.get_jobs()
            job = replace(backend.new_job(jobs.dies, [9], {}), lease_ms=50)
            engine.enqueue("default", job)
            result = jobs.dies.get_result(job.id)
            for _ in range(2):  # it runs, and its worker dies, twice: back solo, then dead
                (claimed,) = engine.claim("default", "gone").jobs
                engine.start_many("gone", [("default", job.id, claimed.token)])
                if claimed.job is not None and claimed.job.solo:
                    break
                wait_until(lambda: engine.reap("default").moved, timeout=10)
            log = tmp_path / "signals.jsonl"
            env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.django.settings",
                   "ECHOMQ_TEST_URL": valkey_server.url, "ECHOMQ_SIGNAL_LOG": str(log)}  # fmt: skip
            done = subprocess.run(
                [sys.executable, "manage.py", "runreaper", "--once", "--crash-budget", "1"],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert result.task.get_result(result.id).status == TaskResultStatus.FAILED
            signals = [json.loads(line) for line in log.read_text().splitlines()]
            assert [(s["signal"], s["id"], s["status"]) for s in signals] == [
                ("finished", result.id, str(TaskResultStatus.FAILED))
            ]
        finally:
            conf.reset()
