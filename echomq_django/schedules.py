"""Periodic schedules declared in settings, turned into the engine's ``Schedule``.

::

    ECHOMQ = {
        "SCHEDULES": {
            "nightly-report": {
                "task": "reports.tasks.nightly",   # a @task the worker runs (required)
                "cron": "0 3 * * *",               # or "every": timedelta(minutes=5) / seconds
                "timezone": "Europe/Paris",        # default: settings.TIME_ZONE
                "args": [], "kwargs": {},          # JSON, as for enqueue()
                "queue": "reports",                # default: the task's queue_name
                "priority": 0,                     # default: the task's priority
                "catch_up": "latest",              # "latest" | "all" | "none"
                "overlap": "skip",                 # "skip" | "allow"
                "grace": 60,                       # seconds a tick may be late (catch_up "none")
            },
        },
    }

Or next to the task, with the same keys but ``task``::

    @periodic("nightly-report", cron="0 3 * * *", timezone="Europe/Paris")
    @task
    def nightly(): ...

A name declared twice (in SCHEDULES and by ``@periodic``, or by two tasks) is a
check error. Each fired job is what ``task.enqueue(*args, **kwargs)`` would store, with
every option of the task (priority, max_attempts, lease, timeout, retention, rate limits
and concurrency); a task option a periodic job cannot keep (an idempotency key, and so
``unique_for`` or ``debounce``) is a check error. The task is resolved the
way the worker resolves a row's task (``discovery.resolve_task``): only a Task
object of an installed app's ``tasks`` module, or of a backend's TASK_MODULES.
Problems are system check errors (``schedule_checks``), so ``runreaper`` does
not start with a bad schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from . import conf
from .backends import EchoMQBackend
from .compat import AnyTask, InvalidTask, Task, task_backends
from .discovery import discover_tasks, resolve_task
from .engine.errors import InvalidSchedule
from .engine.schedules import DEFAULT_GRACE_MS, Schedule
from .engine.timing import EVERY_RULE, MAX_EVERY_MS, MIN_EVERY_MS
from .exceptions import MalformedSchedules, PayloadError, UnknownScheduleTask
from .options import duration_ms
from .payload import encode_arguments

KNOWN_KEYS = frozenset(
    {"task", "cron", "every", "timezone", "args", "kwargs", "queue", "priority"}
    | {"catch_up", "overlap", "grace"}
)
T = TypeVar("T")
# name -> the SCHEDULES entries that @periodic declared under it, as tasks modules load
_decorated: dict[str, list[dict[str, Any]]] = {}


def raw_schedules() -> Mapping[str, Any]:
    """``settings.ECHOMQ["SCHEDULES"]`` as written ({} when there is none)."""
    echomq = getattr(settings, "ECHOMQ", {}) or {}
    raw = echomq.get("SCHEDULES", {}) if isinstance(echomq, Mapping) else {}
    if not isinstance(raw, Mapping):
        raise MalformedSchedules(
            f"settings.ECHOMQ['SCHEDULES'] must be a dict of name -> schedule, not "
            f"{type(raw).__name__}"
        )
    return raw or {}


def periodic(name: str, **spec: Any) -> Callable[[T], T]:
    """Declare a schedule of the task below: ``@periodic("sync", every=300)`` above ``@task``.

    ``spec`` takes the keys of a SCHEDULES entry but ``task``; they are checked with
    the others (system checks), not here: a bad one never breaks an import."""

    def declare(task: T) -> T:
        if not isinstance(task, Task):
            raise TypeError("@periodic goes above @task: it needs the Task object")
        entry = {**spec, "task": task.module_path}
        entries = _decorated.setdefault(name, [])
        if entry not in entries:  # a module imported again declares nothing new
            entries.append(entry)
        return task

    return declare


def entries() -> list[tuple[str, Any]]:
    """(name, entry) of SCHEDULES, then of ``@periodic`` (the tasks modules loaded first).

    A name declared twice comes back twice: ``declared`` refuses it, ``problems`` says so."""
    try:
        discover_tasks(task_modules())
    except Exception as exc:  # a tasks module that fails to import: its own error
        raise UnknownScheduleTask(f"loading the tasks modules failed: {exc!r}") from exc
    found = list(raw_schedules().items())
    return found + [(name, entry) for name, specs in _decorated.items() for entry in specs]


def task_modules() -> list[str]:
    """The TASK_MODULES of every EchoMQ backend: where the worker finds tasks."""
    modules: list[str] = []
    for backend in task_backends.all():
        if isinstance(backend, EchoMQBackend):
            modules += backend.task_modules
    return modules


def build(name: object, spec: object) -> Schedule:
    """One SCHEDULES entry as an engine ``Schedule``; ``InvalidSchedule`` says what is wrong."""
    where = f"schedule {name!r}"
    if not isinstance(spec, Mapping):
        raise MalformedSchedules(f"{where} must be a dict, not {type(spec).__name__}")
    unknown = sorted(set(map(str, spec)) - KNOWN_KEYS)
    if unknown:
        raise MalformedSchedules(f"{where} has unknown keys: {', '.join(map(repr, unknown))}")
    path = spec.get("task")
    if not isinstance(path, str) or not path:
        raise UnknownScheduleTask(f"{where} names no task (a dotted path to a @task)")
    try:
        task: AnyTask = resolve_task(path, task_modules())
        changes = {"queue_name": spec["queue"]} if "queue" in spec else {}
        if "priority" in spec:
            changes["priority"] = priority(spec["priority"])
        task = task.using(**changes) if changes else task
    except PayloadError as exc:
        raise UnknownScheduleTask(f"{where}: {exc}") from None
    except (InvalidTask, ImproperlyConfigured, ValueError, TypeError) as exc:
        raise InvalidSchedule(f"{where}: {exc}") from None
    try:
        backend = task.get_backend()
        if not isinstance(backend, EchoMQBackend):
            raise InvalidSchedule(
                f"task {path!r} uses the {type(backend).__name__} backend, not EchoMQ's"
            )
        backend.ensure_configured()
        backend.validate_task(task)
        args, kwargs = encode_arguments(*arguments(spec))
        job = backend.new_job(task, args, kwargs, traced=False).validate(
            conf.get_settings().max_payload
        )
        every = every_ms(spec.get("every"))
        grace = duration_ms(spec.get("grace"), "grace")
        return Schedule(
            name=name,  # type: ignore[arg-type]  # any SCHEDULES key: Schedule validates it
            queue=task.queue_name,
            job=job,
            cron=spec.get("cron") or "",
            every_ms=every,
            timezone=spec.get("timezone") or getattr(settings, "TIME_ZONE", None) or "UTC",
            catch_up=spec.get("catch_up", "latest"),
            overlap=spec.get("overlap", "skip"),
            grace_ms=DEFAULT_GRACE_MS if grace is None else grace,
        )
    except InvalidSchedule as exc:
        raise type(exc)(f"{where}: {exc}") from None
    except (InvalidTask, ImproperlyConfigured, ValueError, TypeError, AttributeError) as exc:
        raise InvalidSchedule(f"{where}: {exc}") from None


def every_ms(value: object) -> int:
    """A schedule's ``every`` (seconds, or a timedelta) in ms; 0 when not given. Given,
    0 is refused as any other value out of bounds (it is not "no every")."""
    if value is None:
        return 0
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds != int(seconds)
        or not MIN_EVERY_MS <= int(seconds) * 1000 <= MAX_EVERY_MS
    ):
        raise InvalidSchedule(f"{EVERY_RULE}, not {value!r:.40}")
    return int(seconds) * 1000


def priority(value: object) -> int:
    """A schedule's ``priority``: an int (Django's own check then says its bounds)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSchedule(f"priority must be an int, not {value!r:.40}")
    return value


def arguments(spec: Mapping[str, Any]) -> tuple[list[Any] | tuple[Any, ...], Mapping[str, Any]]:
    """A schedule's ``args`` (a list or tuple) and ``kwargs`` (a dict of str names), as a
    call ``task.enqueue(*args, **kwargs)`` takes them; ``InvalidSchedule`` otherwise.

    Checked here because the payload splats any iterable: ``"args": "report.pdf"`` ran
    the task with one argument per character, a dict gave its keys, bytes their values,
    and ``{1: 2}`` as kwargs stored the key as "1", which no Python call could pass.
    None is refused too: leave the key out for no arguments."""
    args, kwargs = spec.get("args", ()), spec.get("kwargs", {})
    if not isinstance(args, list | tuple):
        raise InvalidSchedule(
            f"args must be a list of the task's arguments, not {type(args).__name__}"
        )
    if not isinstance(kwargs, Mapping):
        raise InvalidSchedule(
            f"kwargs must be a dict of argument names -> values, not {type(kwargs).__name__}"
        )
    if bad := [key for key in kwargs if not isinstance(key, str)]:
        raise InvalidSchedule(f"kwargs names must be str, not {str(bad[0])[:40]!r}")
    return args, kwargs


def declared() -> list[Schedule]:
    """Every schedule declared (the first problem raises ``InvalidSchedule``)."""
    listed = entries()
    if twice := _duplicates(listed):
        raise twice[0]
    return [build(name, spec) for name, spec in listed]


def problems() -> list[InvalidSchedule]:
    """Every schedule's problem, one per bad schedule (what the system check reports)."""
    try:
        listed = entries()
    except InvalidSchedule as exc:
        return [exc]
    found = _duplicates(listed)
    for name, spec in listed:
        try:
            build(name, spec)
        except InvalidSchedule as exc:
            found.append(exc)
    return found


def _duplicates(listed: list[tuple[str, Any]]) -> list[InvalidSchedule]:
    names = [name for name, _ in listed]
    found: list[InvalidSchedule] = []
    for name in sorted({n for n in names if names.count(n) > 1}, key=str):
        tasks = ", ".join(
            str(spec.get("task")) if isinstance(spec, Mapping) else "?"
            for n, spec in listed
            if n == name
        )
        found.append(MalformedSchedules(f"schedule {name!r} is declared more than once ({tasks})"))
    return found
