"""A task must be found by its module path, which is all a job's row holds: one whose
path names no Task of its function (a lambda, a renamed function) is refused at
enqueue, before anything is stored, not accepted and then refused by every worker."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from echomq_django.compat import InvalidTask
from echomq_django.engine.worker import Worker
from echomq_django.execution import execute
from tests.django import pathless_tasks, tasks
from tests.django import settings as django_settings

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["deliver", "anonymous", "shadowed"])
def test_a_task_its_path_does_not_name_is_refused_at_enqueue(echomq, jobs, name):
    task = getattr(pathless_tasks, name)
    with pytest.raises(InvalidTask, match="does not name this task"):
        task.enqueue(1)
    with pytest.raises(InvalidTask, match="does not name this task"):
        task.using(priority=3).enqueue(1)
    assert echomq.keys("*") == []


def test_every_enqueue_path_refuses_it(echomq, jobs):
    task = pathless_tasks.deliver
    with pytest.raises(InvalidTask):
        task.get_backend().enqueue_many(task, [((1,), {}), ((2,), {})])
    with pytest.raises(InvalidTask):
        pytest.importorskip("asgiref.sync").async_to_sync(task.aenqueue)(1)
    assert echomq.keys("*") == []


def test_a_task_found_by_its_path_runs_under_any_using(echomq, jobs):
    result = tasks.add.using(priority=7, queue_name="emails").enqueue(2, 3)
    Worker(jobs, ("emails",), execute, burst=True, name="w", idle_block_s=0.2).run()
    result.refresh()
    assert (result.status, result.return_value) == ("SUCCESSFUL", 5)


@pytest.fixture
def twin_jobs(settings):
    """``tests.django.taskapp.jobs`` (in an installed app) loaded again under a second
    name, as when the app's folder is on sys.path too."""
    settings.INSTALLED_APPS = django_settings.INSTALLED_APPS
    from tests.django.taskapp import jobs

    spec = importlib.util.spec_from_file_location("jobs_twin", jobs.__file__)
    module = importlib.util.module_from_spec(spec)
    sys.modules["jobs_twin"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["jobs_twin"]


def test_a_task_of_an_app_module_loaded_under_a_second_name_is_refused(echomq, twin_jobs):
    with pytest.raises(InvalidTask, match=r"also loaded as 'tests\.django\.taskapp\.jobs'"):
        twin_jobs.add.enqueue(1, 2)
    assert echomq.keys("*") == []


def test_the_same_task_through_its_app_name_is_stored(echomq, twin_jobs):
    from tests.django.taskapp import jobs

    assert jobs.add.enqueue(1, 2).enqueued_at is not None
