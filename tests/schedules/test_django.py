"""ECHOMQ["SCHEDULES"] in a Django project: the system checks, the admin page, the CLI, metrics."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from echomq_django import conf, schedules
from echomq_django.engine.scheduler import Scheduler
from echomq_django.metrics import exposition
from echomq_django.schedule_checks import check_schedules
from tests.django import settings as django_settings
from tests.django import tasks
from tests.schedules.conftest import whole_second

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
PAGE = "/admin/echomq/schedules/"
TASK = "tests.django.tasks.add"
NIGHTLY = {"task": TASK, "cron": "0 3 * * *", "timezone": "Europe/Paris", "args": [1, 2]}


@pytest.fixture
def declare(settings, url, redis_client):
    """declare(SCHEDULES) -> the Scheduler: the app aimed at the (flushed) server."""

    def point(entries):
        settings.ECHOMQ = {"URL": url, "SCHEDULES": entries}
        settings.TASKS = django_settings.TASKS
        conf.reset()
        return Scheduler(conf.get_jobs())

    yield point
    conf.reset()


def user(django_user_model, name: str, *perms: str) -> Client:
    account = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    for codename in perms:
        account.user_permissions.add(
            Permission.objects.get(content_type__app_label="echomq", codename=codename)
        )
    client = Client()
    client.force_login(account)
    return client


# -- settings and checks ---------------------------------------------------------------------


def test_a_declared_schedule_fires_what_enqueue_would_store(declare):
    declare({"nightly": NIGHTLY, "sync": {"task": TASK, "every": timedelta(minutes=5),
                                          "queue": "emails", "priority": 7}})  # fmt: skip
    nightly, sync = schedules.declared()
    assert (nightly.queue, nightly.timezone, nightly.timing.describe()) == (
        "default", "Europe/Paris", "0 3 * * *"
    )  # fmt: skip
    assert json.loads(nightly.job.payload)["args"] == [1, 2] and nightly.job.task == TASK
    assert (sync.queue, sync.job.priority, sync.every_ms, sync.timezone) == (
        "emails", 7, 300_000, "UTC"  # the zone defaults to settings.TIME_ZONE
    )  # fmt: skip
    assert check_schedules() == []


def test_periodic_declares_a_schedule_next_to_its_task(declare, monkeypatch):
    monkeypatch.setattr(schedules, "_decorated", {})
    declare({"nightly": NIGHTLY})
    assert schedules.periodic("hourly", cron="0 * * * *", args=[2, 3])(tasks.add) is tasks.add
    assert [s.name for s in schedules.declared()] == ["nightly", "hourly"]
    hourly = schedules.declared()[1]
    assert (hourly.name, hourly.job.task, hourly.cron) == ("hourly", TASK, "0 * * * *")
    assert json.loads(hourly.job.payload)["args"] == [2, 3] and check_schedules() == []

    schedules.periodic("nightly", every=60)(tasks.echo)  # the name SCHEDULES already has
    (message,) = check_schedules()
    assert message.id == "echomq.E101" and "declared more than once" in message.msg
    assert TASK in message.msg and "tests.django.tasks.echo" in message.msg
    with pytest.raises(schedules.MalformedSchedules):
        schedules.declared()
    schedules.periodic("broken", cron="0 3 * *")(tasks.add)  # checked later, not at import
    assert [m.id for m in check_schedules()] == ["echomq.E101", "echomq.E103"]
    with pytest.raises(TypeError, match="above @task"):
        schedules.periodic("plain", every=60)(lambda: None)


@pytest.mark.parametrize(
    "entry, check_id, text",
    [
        ({"task": "os.system", "every": 60}, "echomq.E102", "not a Task object"),
        ({"task": "tests.django.tasks.nope", "every": 60}, "echomq.E102", "nope"),
        ({"every": 60}, "echomq.E102", "names no task"),
        ({**NIGHTLY, "cron": "0 25 * * *"}, "echomq.E103", "bad cron expression"),
        ({**NIGHTLY, "timezone": "Europe/Atlantis"}, "echomq.E104", "Europe/Atlantis"),
        ({**NIGHTLY, "cron_expr": "x"}, "echomq.E101", "unknown keys: 'cron_expr'"),
        ("0 3 * * *", "echomq.E101", "must be a dict"),
        ({**NIGHTLY, "args": [object()]}, "echomq.E105", "cannot be stored as JSON"),
        ({**NIGHTLY, "queue": "no{braces}"}, "echomq.E105", "no{braces}"),
        ({**NIGHTLY, "every": 60}, "echomq.E105", "exactly one"),
        ({**NIGHTLY, "catch_up": "all"}, "echomq.E105", "needs overlap 'allow'"),
        ({"task": TASK, "every": -1}, "echomq.E105", "every"),
        ({**NIGHTLY, "args": ["x" * 600_000]}, "echomq.E105", "over the limit"),
        ({**NIGHTLY, "kwargs": {"s": "\udcff"}}, "echomq.E105", "surrogate"),
        ({**NIGHTLY, "args": "report.pdf"}, "echomq.E105", "args must be a list"),
        ({**NIGHTLY, "args": {"a": 1}}, "echomq.E105", "args must be a list"),
        ({**NIGHTLY, "args": b"hi"}, "echomq.E105", "args must be a list"),
        ({**NIGHTLY, "args": None}, "echomq.E105", "args must be a list"),
        ({**NIGHTLY, "kwargs": [1]}, "echomq.E105", "kwargs must be a dict"),
        ({**NIGHTLY, "kwargs": None}, "echomq.E105", "kwargs must be a dict"),
        ({**NIGHTLY, "kwargs": {1: 2}}, "echomq.E105", "kwargs names must be str"),
        ({**NIGHTLY, "timezone": "\udcff"}, "echomq.E104", "unknown time zone"),
        ({"task": TASK, "every": 0}, "echomq.E105", "from 1 second to 366 days, not 0"),
        ({"task": TASK, "every": 10**30}, "echomq.E105", "from 1 second to 366 days"),
        ({"task": TASK, "every": 1.0001}, "echomq.E105", "whole seconds"),
        ({"task": TASK, "every": "60"}, "echomq.E105", "whole seconds"),
        ({**NIGHTLY, "priority": "1"}, "echomq.E105", "priority must be an int"),
        ({**NIGHTLY, "cron": ["0 3 * * *"]}, "echomq.E103", "a cron expression is text"),
        ({**NIGHTLY, "timezone": ["UTC"]}, "echomq.E104", "a time zone is a name"),
    ],
)
def test_a_bad_schedule_is_a_system_check_error_that_says_what(declare, entry, check_id, text):
    declare({"bad": entry, "good": NIGHTLY})
    (message,) = check_schedules()
    assert message.id == check_id and text in message.msg and "'bad'" in message.msg
    assert message.hint


def test_manage_py_check_refuses_a_bad_cron_expression(url):
    echomq = {"URL": url, "SCHEDULES": {"nightly": {**NIGHTLY, "cron": "0 3 * *"}}}
    env = {"DJANGO_SETTINGS_MODULE": "tests.support.deployed_settings",
           "ECHOMQ_TEST_SETTINGS": json.dumps(echomq), "PATH": "/usr/bin:/bin"}  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-m", "django", "check"],
        cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 1
    assert "echomq.E103" in run.stderr and "'nightly'" in run.stderr and "0 3 * *" in run.stderr


# -- the admin --------------------------------------------------------------------------------


def test_the_schedules_page_shows_each_schedule_and_its_last_job(
    declare, django_user_model, redis_client
):
    scheduler = declare({"nightly": NIGHTLY, "later": {"task": TASK, "every": 60}})
    scheduler.sync([schedules.declared()[0]])  # a reaper stored "nightly", not yet "later"
    job_id = scheduler.run_now("default", "nightly")
    viewer = user(django_user_model, "viewer", "view_queue")
    page = viewer.get(PAGE)
    assert page.status_code == 200
    html = page.content.decode()
    assert "nightly" in html and TASK in html and "0 3 * * *" in html and "Europe/Paris" in html
    assert f"/admin/echomq/queues/default/jobs/{job_id}/" in html and "pending" in html
    assert "not stored" in html  # "later": declared, waiting for a reaper
    assert "/nightly/pause/" not in html  # no action without the change permission
    assert PAGE in viewer.get("/admin/echomq/").content.decode()  # the dashboard links here
    assert user(django_user_model, "staff").get(PAGE).status_code == 403
    assert Client().get(PAGE).status_code == 302  # to the login page


def test_actions_need_post_csrf_and_the_change_permission(declare, django_user_model):
    scheduler = declare({"nightly": NIGHTLY})
    scheduler.sync(schedules.declared())
    pause = f"{PAGE}default/nightly/pause/"
    assert user(django_user_model, "viewer", "view_queue").post(pause).status_code == 403
    changer = user(django_user_model, "changer", "view_queue", "change_queue")
    assert changer.get(pause).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(django_user_model.objects.get(username="changer"))
    assert strict.post(pause).status_code == 403
    assert scheduler.get("default", "nightly").status == "active"  # nothing changed so far

    assert changer.post(pause).status_code == 302
    assert scheduler.get("default", "nightly").status == "paused"
    response = changer.post(f"{PAGE}default/nightly/run-now/", follow=True)
    assert "enqueued" in response.content.decode()
    assert conf.get_jobs().stats("default").counts["pending"] == 1
    assert changer.post(f"{PAGE}default/nightly/resume/").status_code == 302
    assert scheduler.get("default", "nightly").status == "active"
    response = changer.post(f"{PAGE}default/nightly/resume/", follow=True)
    assert "not paused" in response.content.decode()  # a clear error, nothing changed
    assert changer.post(f"{PAGE}default/no%20such/pause/").status_code == 404


def test_an_orphaned_schedule_is_removed_after_a_confirmation(declare, django_user_model):
    scheduler = declare({"nightly": NIGHTLY})
    scheduler.sync(schedules.declared())
    scheduler.sync([], ["default"])  # the next deploy no longer declares it
    deleter = user(django_user_model, "deleter", "view_queue", "delete_queue")
    assert "orphaned" in deleter.get(PAGE).content.decode()
    remove = f"{PAGE}default/nightly/remove/"
    assert "Yes, remove" in deleter.get(remove).content.decode()
    assert deleter.post(remove, {"confirm": "yes"}).status_code == 302
    assert scheduler.get("default", "nightly") is None


# -- the CLI and metrics ------------------------------------------------------------------------


def echomq(*args: str) -> str:
    out = io.StringIO()
    call_command("echomq", *args, stdout=out)
    return out.getvalue()


def test_the_cli_lists_runs_pauses_and_resumes_schedules(declare):
    scheduler = declare({"nightly": NIGHTLY})
    scheduler.sync(schedules.declared())
    (listed,) = json.loads(echomq("schedules", "--json"))
    assert (listed["name"], listed["status"], listed["expression"], listed["fired"]) == (
        "nightly", "active", "0 3 * * *", 0
    )  # fmt: skip
    ran = json.loads(echomq("schedules", "run-now", "nightly", "--json"))
    assert conf.get_jobs().get("default", ran["job_id"]).task == TASK
    assert "paused" in echomq("schedules", "pause", "nightly")
    assert json.loads(echomq("schedules", "--json"))[0]["status"] == "paused"
    assert "resumed" in echomq("schedules", "resume", "nightly")
    assert "nightly" in echomq("schedules")  # the table
    with pytest.raises(CommandError, match="no schedule 'nope'"):
        echomq("schedules", "run-now", "nope")
    with pytest.raises(CommandError, match="needs the schedule's NAME"):
        echomq("schedules", "pause")
    with pytest.raises(CommandError, match="schedule name"):
        echomq("schedules", "pause", "a:b")


def test_prometheus_has_each_schedules_last_fire_and_misses(declare, redis_client):
    scheduler = declare({"beat": {"task": TASK, "every": 1, "overlap": "allow"}})
    scheduler.sync(schedules.declared())
    now = whole_second(lambda: scheduler.read("default")[0])
    redis_client.zadd("emq:{default}:schedules", {"beat": now - 3000})
    scheduler.fire_due(["default"])
    text = exposition(conf.get_jobs())
    labels = '{queue="default",schedule="beat"}'
    assert f"echomq_schedule_last_fire_timestamp_seconds{labels} {now / 1000}" in text
    assert f"echomq_schedule_missed_total{labels} 3" in text
    assert f"echomq_schedule_fired_total{labels} 1" in text
