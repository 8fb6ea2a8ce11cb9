"""Schedule records planted on the server: one unreadable value is that schedule's problem.

Whatever a schedule's score or fire record holds (-inf, a tick past year 9999, 400
digits, text), the reaper logs it with the schedule's name, keeps sweeping leases and
firing the other schedules; a listing shows the rest of the record; an operator's
action on it is a clear error; metrics leave the value out.
"""

from __future__ import annotations

import json
import logging
import signal
from typing import Any

import pytest
from django.core.management.base import CommandError

from echomq_django import conf, schedules
from echomq_django.engine.errors import CorruptRow, InvalidSchedule
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.reaper import Reaper
from echomq_django.engine.scheduler import Scheduler
from echomq_django.engine.schedules import Schedule
from echomq_django.engine.timing import MAX_MS
from echomq_django.metrics import exposition
from tests.support import procs
from tests.support.waiting import wait_until

from .conftest import PAYLOAD, backdate, every
from .test_django import PAGE, echomq, user
from .test_django import declare as declare  # a fixture
from .test_processes import wait_for

K = QueueKeys.of("q")
BEYOND = [str(10**20), "1" + "0" * 400, str(MAX_MS + 1), "-5", "1.5", "nan", "soon"]


def cron(timezone: str = "UTC") -> Schedule:
    job = NewJob(payload=PAYLOAD, task="tests.django.tasks.add")
    return Schedule(name="nightly", queue="q", job=job, cron="0 3 * * *", timezone=timezone)


def server_ms(scheduler: Scheduler) -> int:
    return scheduler.read("q")[0]


def expired_lease(jobs: Jobs, scheduler: Scheduler) -> str:
    """A job of queue q whose lease has run out on the server's clock: the reaper's to take."""
    job_id = jobs.enqueue("q", NewJob(payload=PAYLOAD, task="tests.django.tasks.add")).id
    (claimed,) = jobs.claim("q", "w-gone", lease_ms=1).jobs
    deadline = int(jobs.get("q", claimed.id).lease_deadline)
    wait_until(lambda: server_ms(scheduler) > deadline)
    return job_id


def sweep_once(jobs: Jobs, **options: Any) -> None:
    Reaper(jobs, ["q"], discover=False, **options).run(once=True)


def test_a_minus_inf_score_is_logged_and_the_reaper_sweeps_and_fires_the_others(
    scheduler, jobs, redis_client, caplog
):
    scheduler.sync([every("good", overlap="allow"), every("bad", overlap="allow")])
    redis_client.zadd(K.schedules, {"bad": float("-inf")})
    backdate(redis_client, "q", "good", server_ms(scheduler) // 1000 * 1000)
    lost = expired_lease(jobs, scheduler)
    with caplog.at_level(logging.ERROR, "echomq.scheduler"):
        sweep_once(jobs)
    assert jobs.get("q", lost).state == "pending"  # the lease was reaped
    assert scheduler.get("q", "good").counter("fired") == 1
    assert "schedule bad of queue q cannot fire" in caplog.text and "next_ms" in caplog.text
    assert scheduler.get("q", "bad").next_ms is None  # a listing still shows it


@pytest.mark.parametrize("value", BEYOND)
def test_an_unreadable_last_tick_fails_only_its_own_sync(
    scheduler, jobs, redis_client, caplog, value
):
    scheduler.sync([cron(), every("good")])
    redis_client.hset(K.schedule("nightly"), "last_tick", value)
    lost = expired_lease(jobs, scheduler)
    with caplog.at_level(logging.ERROR, "echomq.scheduler"):
        sweep_once(jobs, schedules=[cron(), every("good", seconds=2)])  # "good" was edited
    assert jobs.get("q", lost).state == "pending"
    assert "q/nightly cannot be stored" in caplog.text and "last_tick" in caplog.text
    assert scheduler.get("q", "good").fields["every_ms"] == "2000"  # the others were stored
    scheduler.pause("q", "nightly")
    with pytest.raises(InvalidSchedule, match="last_tick"):
        scheduler.resume("q", "nightly")


def test_a_last_tick_a_zone_takes_past_year_9999_is_a_clear_error(scheduler, redis_client):
    scheduler.sync([cron("Asia/Tokyo")])
    redis_client.hset(K.schedule("nightly"), "last_tick", str(MAX_MS))
    assert scheduler.sync([cron("Asia/Tokyo")]) == {"q/nightly": "failed"}
    scheduler.pause("q", "nightly")
    with pytest.raises(InvalidSchedule, match="no tick after"):
        scheduler.resume("q", "nightly")


@pytest.mark.parametrize("score", [float("-inf"), 1.5, 1e300])
def test_a_planted_score_never_stops_the_others_or_spins_the_loop(
    scheduler, redis_client, caplog, score
):
    scheduler.sync([every("good", overlap="allow"), every("bad", overlap="allow")])
    redis_client.zadd(K.schedules, {"bad": score})
    backdate(redis_client, "q", "good", server_ms(scheduler) // 1000 * 1000)
    with caplog.at_level(logging.ERROR, "echomq.scheduler"):
        first = scheduler.fire_due(["q"])
        again = scheduler.fire_due(["q"])
    assert [f.name for f in first.fired] == ["good"]
    assert first.wait_ms is not None and 0 < first.wait_ms <= 1000
    assert again.wait_ms is not None and again.wait_ms > 0
    logged = caplog.text.count("schedule bad of queue q cannot fire")
    assert logged == (0 if score == 1e300 else 1)  # once, not on every pass


def test_a_bug_in_one_schedule_never_stops_the_sweeps(
    scheduler, jobs, redis_client, caplog, monkeypatch
):
    scheduler.sync([every("good", overlap="allow"), every("buggy", overlap="allow")])
    for name in ("good", "buggy"):
        backdate(redis_client, "q", name, server_ms(scheduler) // 1000 * 1000)
    planner = Scheduler._fire_call

    def fire_call(keys, name, *args):
        if name == "buggy":
            raise ZeroDivisionError("a bug")
        return planner(keys, name, *args)

    monkeypatch.setattr(Scheduler, "_fire_call", staticmethod(fire_call))
    lost = expired_lease(jobs, scheduler)
    with caplog.at_level(logging.ERROR, "echomq.scheduler"):
        sweep_once(jobs)
    assert jobs.get("q", lost).state == "pending"
    assert scheduler.get("q", "good").counter("fired") == 1
    assert "schedule buggy of queue q cannot fire: ZeroDivisionError" in caplog.text


@pytest.mark.parametrize("broken", ["sync", "fire_due"])
def test_a_bug_in_the_whole_schedule_pass_never_stops_the_sweeps(
    scheduler, jobs, caplog, monkeypatch, broken
):
    def bug(*args, **kwargs):
        raise TypeError("a bug")

    monkeypatch.setattr(Scheduler, broken, bug)
    lost = expired_lease(jobs, scheduler)
    with caplog.at_level(logging.ERROR, "echomq.reaper"):
        sweep_once(jobs, schedules=[every("good")])
    assert jobs.get("q", lost).state == "pending"
    assert "TypeError: a bug" in caplog.text  # with its traceback


def test_a_row_key_of_another_type_reads_as_a_corrupt_row(jobs):
    job_id = jobs.enqueue("q", NewJob(payload=PAYLOAD)).id
    jobs.connector.client.delete(K.job(job_id))
    jobs.connector.client.set(K.job(job_id), "planted")
    with pytest.raises(CorruptRow, match="not a row"):
        jobs.get("q", job_id)
    with pytest.raises(CorruptRow, match="not a row"):
        jobs.find(["other", "q"], job_id)


# -- the Django side: the admin page and its actions, the CLI, metrics -----------------------

TASK = "tests.django.tasks.add"


def planted(declare, redis_client) -> Scheduler:
    """Two schedules of queue default: 'nightly' paused with a last tick of 400 digits
    and counts past int64, its last job a key holding a STRING; 'beat' readable."""
    scheduler = declare({"nightly": {"task": TASK, "cron": "0 3 * * *"},
                         "beat": {"task": TASK, "every": 60}})  # fmt: skip
    scheduler.sync(schedules.declared())
    job_id = scheduler.run_now("default", "nightly")
    scheduler.pause("default", "nightly")
    keys = QueueKeys.of("default")
    redis_client.delete(keys.job(job_id))
    redis_client.set(keys.job(job_id), "planted")
    redis_client.hset(keys.schedule("nightly"), mapping={
        "last_tick": "1" + "0" * 400, "fired": str(2**64), "missed": "-1"})  # fmt: skip
    return scheduler


@pytest.mark.django_db
def test_the_schedules_page_lists_every_schedule_and_resume_says_what_is_wrong(
    declare, django_user_model, redis_client
):
    planted(declare, redis_client)
    changer = user(django_user_model, "changer", "view_queue", "change_queue")
    page = changer.get(PAGE)
    assert page.status_code == 200
    html = page.content.decode()
    assert "nightly" in html and "beat" in html and "unreadable" in html
    done = changer.post(f"{PAGE}default/nightly/resume/", follow=True)
    assert done.status_code == 200
    text = done.content.decode()
    assert "Resume failed" in text and "last_tick" in text


@pytest.mark.django_db
def test_the_cli_and_metrics_leave_an_unreadable_value_out(declare, redis_client):
    planted(declare, redis_client)
    listed = {s["name"]: s for s in json.loads(echomq("schedules", "--json"))}
    assert listed["nightly"]["last_tick_ms"] is None and listed["nightly"]["fired"] == 0
    assert "nightly" in echomq("schedules")  # the table
    with pytest.raises(CommandError, match=r"UnreadableSchedule: .*last_tick"):
        echomq("schedules", "resume", "nightly")
    text = exposition(conf.get_jobs())
    nightly = '{queue="default",schedule="nightly"}'
    assert f"echomq_schedule_last_fire_timestamp_seconds{nightly}" not in text
    assert f"echomq_schedule_fired_total{nightly} 0" in text
    assert f"echomq_schedule_missed_total{nightly} 0" in text


@pytest.mark.django_db
def test_echomq_workers_shows_a_running_job_whose_key_is_not_a_row(echomq_settings, redis_client):
    from echomq_django.engine.registry import WorkerInfo
    from echomq_django.job_cli import running_jobs

    jobs = conf.get_jobs()
    good = jobs.enqueue("default", NewJob(payload=PAYLOAD, task=TASK)).id
    bad = jobs.enqueue("default", NewJob(payload=PAYLOAD, task=TASK)).id
    redis_client.delete(QueueKeys.of("default").job(bad))
    redis_client.set(QueueKeys.of("default").job(bad), "planted")
    worker = WorkerInfo("w", "h", 1, ["default"], 2, [bad, good], 0.0, 0.0)
    held = running_jobs(jobs, worker, 10**15)
    assert [(j["id"], j["task"]) for j in held] == [(bad, None), (good, TASK)]


@pytest.fixture
def echomq_settings(settings, url):
    settings.ECHOMQ = {"URL": url}
    conf.reset()
    yield url
    conf.reset()


# -- a real runreaper process ------------------------------------------------------------------


@pytest.mark.slow
def test_a_running_reaper_survives_a_minus_inf_plant_and_still_reaps(connector, url, tmp_path):
    jobs, scheduler = Jobs(connector), Scheduler(Jobs(connector))
    declared = {"good": {"task": TASK, "every": 1, "overlap": "allow"}}
    echomq_env = {"URL": url, "QUEUES": ["default"], "SCHEDULES": declared}
    reaper = procs.start(
        "runreaper", url, log_dir=tmp_path,
        DJANGO_SETTINGS_MODULE="tests.support.deployed_settings",
        ECHOMQ_TEST_SETTINGS=json.dumps(echomq_env),
    )  # fmt: skip

    def good() -> Any:
        return next((s for s in scheduler.read("default")[1] if s.name == "good"), None)

    try:
        first = wait_for(lambda: (g := good()) and g.last_tick, 60, "a first tick", [reaper])
        keys = QueueKeys.of("default")
        connector.client.hset(keys.schedule("bad"), mapping=dict(good().fields))
        connector.client.zadd(keys.schedules, {"bad": float("-inf")})
        job_id = jobs.enqueue("default", NewJob(payload=PAYLOAD, task=TASK)).id
        jobs.claim("default", "w-gone", count=1000, lease_ms=1)  # and the jobs "good" fired
        logged = "schedule bad of queue default cannot fire"
        wait_for(lambda: logged in reaper.log(), 60, "the plant logged", [reaper])
        back = lambda: jobs.get("default", job_id).state == "pending"  # noqa: E731
        wait_for(back, 60, "the expired lease reaped", [reaper])
        wait_for(lambda: good().last_tick > first, 60, "'good' fired again", [reaper])
        assert reaper.popen.poll() is None, reaper.log()[-3000:]
    finally:
        if reaper.popen.poll() is None:
            reaper.send(signal.SIGTERM)
        code = reaper.wait(20)
    assert code == 0, reaper.log()[-3000:]
    assert "Traceback" not in reaper.log()
