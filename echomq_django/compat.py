"""The one place that knows where Django's Tasks framework lives.

Django 6.0+ ships it as ``django.tasks``; on Django 5.2 LTS the ``django-tasks``
backport provides the same API as ``django_tasks`` (a few names differ). Every
other module imports the framework from here, so supporting a new version is a
change to this file only.

``task`` here is the framework's decorator made portable: Django 6.0's ``@task``
takes no extra keyword arguments (6.1 and the backport pass them to the
backend's ``task_class``), and Django's own ImmediateBackend and DummyBackend
have no field for EchoMQ's options. So ``@task(max_attempts=3, backoff=10)``
from here works on every stack, and a project whose test settings switch the
backend to ImmediateBackend gets its tasks built, with the options that backend
has no field for ignored (one warning per backend and option set).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeAlias

try:  # Django 6.0+
    from django.tasks import (
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        default_task_backend,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_PRIORITY,
        DEFAULT_TASK_QUEUE_NAME,
        TaskError,
    )
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    FRAMEWORK = "django.tasks"
except ImportError:  # Django 5.2 with the django-tasks backport
    if TYPE_CHECKING:  # the checker reads the Django 6 API above (the primary stack's): the
        raise  # backport mirrors it, and its own annotations would conflict with those
    from django_tasks import (
        TaskContext,
        TaskResult,
        TaskResultStatus,
        default_task_backend,
        task_backends,
    )
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_PRIORITY,
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskError,
    )
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    FRAMEWORK = "django_tasks"

# "Any task" and "any task's result" for annotations: Task and TaskResult are generic over the
# function's parameters and return value in django-stubs only (not subscriptable at run time).
if TYPE_CHECKING:
    AnyTask: TypeAlias = Task[..., Any]
    AnyTaskResult: TypeAlias = TaskResult[..., Any]
else:
    AnyTask = Task
    AnyTaskResult = TaskResult

# Django's reference backends, as TASKS "BACKEND" paths on this stack.
IMMEDIATE_BACKEND = f"{FRAMEWORK}.backends.immediate.ImmediateBackend"
DUMMY_BACKEND = f"{FRAMEWORK}.backends.dummy.DummyBackend"


class TaskOptionsIgnored(UserWarning):
    """A task sets options its backend has no field for (e.g. EchoMQ's on ImmediateBackend)."""


_warned: set[tuple[str, tuple[str, ...]]] = set()
_warned_lock = threading.Lock()


def task(
    function: Callable[..., Any] | None = None,
    *,
    priority: int = DEFAULT_TASK_PRIORITY,
    queue_name: str = DEFAULT_TASK_QUEUE_NAME,
    backend: str = DEFAULT_TASK_BACKEND_ALIAS,
    takes_context: bool = False,
    **options: Any,
) -> Any:
    """Django's ``@task``, taking the backend's own task options on every stack.

    Under EchoMQ every option is passed to its task class (a misspelt one is a
    ``TypeError``). Under another backend, the options its task class has no
    field for are dropped with a ``TaskOptionsIgnored`` warning, once per
    backend and option set.
    """
    if "run_after" in options:  # as Django 6.1 says it
        raise TypeError(
            "run_after cannot be defined statically with the @task decorator. "
            "Use .using(run_after=...) to set it dynamically."
        )

    def build(func: Callable[..., Any]) -> AnyTask:
        task_class = task_backends[backend].task_class
        from .options import EchoMQTask  # here: options imports this module

        if not issubclass(task_class, EchoMQTask):
            accepted = {f.name for f in fields(task_class)}
            ignored = tuple(sorted(set(options) - accepted))
            if ignored:  # stack: warn, warn_ignored, build, task or wrapper, the caller
                warn_ignored(backend, task_class, ignored)
                options_kept = {k: v for k, v in options.items() if k in accepted}
            else:
                options_kept = options
        else:  # every option is passed: a misspelt one is a TypeError
            options_kept = options
        return task_class(
            func=func,
            priority=priority,
            queue_name=queue_name,
            backend=backend,
            takes_context=takes_context,
            run_after=None,  # Django 6.0's Task has no default for it
            **options_kept,
        )

    if function:
        return build(function)

    def wrapper(func: Callable[..., Any]) -> AnyTask:
        return build(func)

    return wrapper


def warn_ignored(alias: str, task_class: type, ignored: tuple[str, ...]) -> None:
    with _warned_lock:
        if (alias, ignored) in _warned:
            return
        _warned.add((alias, ignored))
    warnings.warn(
        f"task options {', '.join(ignored)} are ignored: the {alias!r} task backend's "
        f"{task_class.__name__} has no field for them",
        TaskOptionsIgnored,
        stacklevel=4,
    )


__all__ = [
    "DEFAULT_TASK_BACKEND_ALIAS",
    "DEFAULT_TASK_PRIORITY",
    "DEFAULT_TASK_QUEUE_NAME",
    "DUMMY_BACKEND",
    "IMMEDIATE_BACKEND",
    "AnyTask",
    "AnyTaskResult",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskOptionsIgnored",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "default_task_backend",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
