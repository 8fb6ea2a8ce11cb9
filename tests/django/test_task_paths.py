"""A task must be found by its module path, which is all a job's row holds: one whose
path names no Task of its function (a lambda, a renamed function) is refused at
enqueue, before anything is stored, not accepted and then refused by every worker."""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from dataclasses import replace

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
    with pytest.raises(InvalidTask, match="names no Task"):
        task.enqueue(1)
    with pytest.raises(InvalidTask, match="names no Task"):
        task.using(priority=3).enqueue(1)
    assert echomq.keys("*") == []


def test_every_enqueue_path_refuses_it(echomq, jobs):
    task = pathless_tasks.deliver
    with pytest.raises(InvalidTask):
        task.get_backend().enqueue_many(task, [((1,), {}), ((2,), {})])
    with pytest.raises(InvalidTask):
        pytest.importorskip("asgiref.sync").async_to_sync(task.aenqueue)(1)
    assert echomq.keys("*") == []


def test_a_task_whose_module_was_reloaded_since_is_stored(echomq):
    """The module's name holds a Task of a new function object (a reload): a worker
    runs that one, so the old Task's enqueue is fine."""
    func = tasks.add.func
    old = types.FunctionType(func.__code__, func.__globals__, func.__name__)
    old.__qualname__, old.__module__ = func.__qualname__, func.__module__
    assert replace(tasks.add, func=old).enqueue(1, 2).enqueued_at is not None


def test_every_loaded_module_is_looked_at_without_its_getattr_hook(echomq, monkeypatch):
    """Looking for a second name of the task's module reads each module's namespace: a
    lazy module's ``__getattr__`` (which may import, or raise) is never called."""
    lazy = types.ModuleType("lazy_raiser")
    lazy.__getattr__ = lambda name: (_ for _ in ()).throw(ImportError(name))
    monkeypatch.setitem(sys.modules, "lazy_raiser", lazy)
    assert pathless_tasks.found.enqueue(1).enqueued_at is not None


def test_a_task_found_by_its_path_runs_under_any_using(echomq, jobs):
    result = tasks.add.using(priority=7, queue_name="emails").enqueue(2, 3)
    Worker(jobs, ("emails",), execute, burst=True, name="w", idle_block_s=0.2).run()
    result.refresh()
    assert (result.status, result.return_value) == ("SUCCESSFUL", 5)


def load_twin(module, name: str):
    """``module``'s file loaded again as ``name`` (its folder on sys.path too, say)."""
    spec = importlib.util.spec_from_file_location(name, module.__file__)
    twin = importlib.util.module_from_spec(spec)
    sys.modules[name] = twin
    spec.loader.exec_module(twin)
    return twin


@pytest.fixture
def twins(settings):
    """``tests.django.taskapp.jobs`` (in an installed app) and ``tests.django.tasks``
    (in TASK_MODULES), each loaded again under a second name."""
    settings.INSTALLED_APPS = django_settings.INSTALLED_APPS
    from tests.django.taskapp import jobs

    yield load_twin(jobs, "jobs_twin"), load_twin(tasks, "tasks_twin")
    del sys.modules["jobs_twin"], sys.modules["tasks_twin"]


@pytest.mark.parametrize(
    ("which", "imported"), [(0, "tests.django.taskapp.jobs"), (1, "tests.django.tasks")]
)
def test_a_task_of_a_module_loaded_under_a_second_name_is_refused(echomq, twins, which, imported):
    with pytest.raises(InvalidTask, match=rf"also loaded as {re.escape(repr(imported))}"):
        twins[which].add.enqueue(1, 2)
    assert echomq.keys("*") == []


def test_the_same_tasks_through_the_names_a_worker_imports_are_stored(echomq, twins):
    from tests.django.taskapp import jobs

    assert jobs.add.enqueue(1, 2).enqueued_at is not None
    assert tasks.add.enqueue(1, 2).enqueued_at is not None
