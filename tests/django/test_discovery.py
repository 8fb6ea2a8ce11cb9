"""Tasks anywhere in an installed app run; nothing outside the installed apps is imported.

Rows are planted straight on the server (as anyone with write access could) and
run by the real engine Worker with ``execution.execute``, in this process with the
test app (``tests.django.taskapp``) installed; the runworker process of the
contract suite (``test_contract.py``) runs the app's tasks the same way.
"""

from __future__ import annotations

import json
import sys

import pytest

from echomq_django import results
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.worker import Worker
from echomq_django.execution import execute
from tests.django import settings as django_settings

pytestmark = pytest.mark.django_db
APP = "tests.django.taskapp"


@pytest.fixture
def app_installed(settings, jobs):
    settings.INSTALLED_APPS = django_settings.INSTALLED_APPS
    yield jobs


def plant(jobs, path: str, args=()) -> str:
    body = {"v": 1, "task": path, "args": list(args), "kwargs": {}, "backend": "default"}
    return jobs.enqueue("default", NewJob(payload=json.dumps(body), task=path)).id


@pytest.fixture
def forget(monkeypatch):
    """Unload modules for one test, so the worker has to find (or refuse) them itself.

    The originals are put back afterwards, and the rebuilt-Task cache is emptied
    both ways: later tests compare their Task objects with the rows' tasks.
    """
    results._rebuild.cache_clear()

    def unload(*modules: str) -> None:
        for name in modules:
            monkeypatch.delitem(sys.modules, name, raising=False)
            parent, _, child = name.rpartition(".")
            if parent in sys.modules:
                monkeypatch.delattr(sys.modules[parent], child, raising=False)

    yield unload
    results._rebuild.cache_clear()


def run(jobs) -> None:
    Worker(jobs, ("default",), execute, burst=True, name="w1", idle_block_s=0.2).run()


def test_a_task_in_any_module_of_an_installed_app_is_imported_and_run(app_installed, forget):
    jobs = app_installed
    forget(f"{APP}.jobs", f"{APP}.coros", f"{APP}.tasks.emails")
    ids = {
        "jobs.add": plant(jobs, f"{APP}.jobs.add", (2, 3)),
        "coros.async_add": plant(jobs, f"{APP}.coros.async_add", (1, 2)),
        "tasks.emails.send": plant(jobs, f"{APP}.tasks.emails.send", ("x@example.com",)),
    }
    run(jobs)
    rows = {name: jobs.get("default", job_id) for name, job_id in ids.items()}
    assert {name: (r.state, json.loads(r.result)) for name, r in rows.items()} == {
        "jobs.add": ("completed", 5),
        "coros.async_add": ("completed", 3),
        "tasks.emails.send": ("completed", "sent to x@example.com"),
    }


def test_only_task_objects_run_and_nothing_outside_the_apps_is_imported(
    app_installed, forget, tmp_path, monkeypatch
):
    jobs = app_installed
    marker = tmp_path / "marks"
    monkeypatch.setenv("ECHOMQ_BAIT_MARKER", str(marker))
    forget(f"{APP}.bait", "tests.security.evil", "antigravity", "this")
    ids = {
        "plain function in an app": plant(jobs, f"{APP}.bait.plain_function"),
        "exception class in an app": plant(jobs, f"{APP}.jobs.Unlucky", ("x",)),
        "missing module in an app": plant(jobs, f"{APP}.nothere.task"),
        "dunder module in an app": plant(jobs, f"{APP}.__main__.task"),
        "os.system": plant(jobs, "os.system", ("true",)),
        "module outside the apps": plant(jobs, "antigravity.fly"),
        "this": plant(jobs, "this.s"),
        "evil, outside the apps": plant(jobs, "tests.security.evil.write_marker"),
    }
    run(jobs)
    for what, job_id in ids.items():
        row = jobs.get("default", job_id)
        assert (row.state, row.attempts) == ("dead", 1), what
        assert row.last_error.startswith("UnknownTask: "), what
    assert marker.read_text().splitlines() == ["imported"]  # imported (in an app), never called
    for outside in ("antigravity", "this", "tests.security.evil", f"{APP}.__main__"):
        assert outside not in sys.modules, outside
