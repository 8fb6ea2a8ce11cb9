"""Task <-> job row: the payload the backend writes and the TaskResult it reads back.

The payload is one JSON object, opaque to the engine and to Lua::

    {"v": 1, "task": "app.tasks.send_mail", "args": [...], "kwargs": {...},
     "backend": "default", "takes_context": false, "idempotency_key": "..."}

Priority, queue, run_after (its exact ISO text) and every timestamp live in the
row itself, where the engine keeps them.

A row names its task by module path, and a row is data anyone with write access
to the server can plant. So a path is resolved only to a ``Task`` object: one
already loaded, one in a module inside an installed app (imported then, see
:mod:`echomq_django.discovery`), or one in each app's ``tasks`` module or the
backend's ``TASK_MODULES``. A path outside the installed apps is never
imported, and nothing named by a row is called unless it is a Task: ``os.system``
is not one, so it is refused.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from importlib import import_module
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from django.utils.module_loading import autodiscover_modules

from .compat import (
    AnyTask,
    AnyTaskResult,
    InvalidTask,
    Task,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
)
from .discovery import app_module, import_app_module
from .engine.jobs import Job
from .engine.times import from_us, to_ms
from .exceptions import InvalidTaskArguments, PayloadError, UnknownTask

VERSION = 1

# Built once: json.dumps with any option builds a new encoder per call.
PAYLOAD_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
VALUE_ENCODER = json.JSONEncoder(allow_nan=False)  # json.dumps(value, allow_nan=False)

STATUS_OF_STATE = {
    "pending": TaskResultStatus.READY,
    "scheduled": TaskResultStatus.READY,
    "active": TaskResultStatus.RUNNING,
    "completed": TaskResultStatus.SUCCESSFUL,
    "dead": TaskResultStatus.FAILED,
}


@dataclass(slots=True)
class Payload:
    """A row's payload, read. Not ``frozen``: a frozen dataclass sets each field through
    ``object.__setattr__``, and a worker reads one for every job it runs."""

    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    backend: str
    takes_context: bool = False
    idempotency_key: str | None = None
    metadata: dict[str, str] | None = None  # the enqueuer's trace context (tracing.py)

    def dumps(self) -> str:
        template = PayloadTemplate.of(
            self.task, self.backend, self.takes_context, self.idempotency_key
        )
        return template.render(self.args, self.kwargs, self.metadata)

    @classmethod
    def loads(cls, text: str) -> Payload:
        """Parse and type-check a stored payload; ``PayloadError`` says what is wrong."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PayloadError(f"the payload is not JSON: {exc}") from None
        except RecursionError:
            raise PayloadError("the payload is nested too deeply to be read") from None
        if not isinstance(data, dict) or data.get("v") != VERSION:
            raise PayloadError(f"the payload is not a version {VERSION} EchoMQ task payload")
        check_fields(data)
        return cls(
            task=data["task"],
            args=data.get("args", []),
            kwargs=data.get("kwargs", {}),
            backend=data["backend"],
            takes_context=data.get("takes_context", False),
            idempotency_key=data.get("idempotency_key"),
            metadata=data.get("metadata"),
        )


@dataclass(frozen=True, slots=True)
class PayloadTemplate:
    """The one writer of a payload's text: the JSON object, key by key in a fixed order.

    The parts that are the same for every enqueue of one Task (its path, backend,
    context flag, idempotency key) are encoded once, into ``head`` (up to the
    arguments) and ``tail``; a call encodes only its arguments and trace context.
    The text is what ``PAYLOAD_ENCODER`` writes for the whole object, byte for byte.
    """

    head: str
    tail: str

    @classmethod
    def of(
        cls, task: str, backend: str, takes_context: bool, idempotency_key: str | None
    ) -> PayloadTemplate:
        encode = PAYLOAD_ENCODER.encode
        tail = f',"backend":{encode(backend)},"takes_context":{encode(takes_context)}'
        if idempotency_key is not None:
            tail += f',"idempotency_key":{encode(idempotency_key)}'
        return cls(f'{{"v":{VERSION},"task":{encode(task)},"args":', tail)

    def render(
        self, args: list[Any], kwargs: dict[str, Any], metadata: dict[str, str] | None = None
    ) -> str:
        """The payload of one call (``args`` and ``kwargs`` as ``encode_arguments`` gave them)."""
        encode = PAYLOAD_ENCODER.encode
        text = (
            f"{self.head}{encode(args) if args else '[]'},"
            f'"kwargs":{encode(kwargs) if kwargs else "{}"}{self.tail}'
        )
        return f'{text},"metadata":{encode(metadata)}}}' if metadata else text + "}"


PAYLOAD_FIELDS: dict[str, type | tuple[type, ...]] = {
    "task": str,
    "args": list,
    "kwargs": dict,
    "backend": str,
    "takes_context": bool,
    "idempotency_key": (str, type(None)),
    "metadata": (dict, type(None)),
}


def check_fields(data: dict[str, Any]) -> None:
    """Raise the ``PayloadError`` naming the first field of ``data`` that is wrong."""
    for name, kind in PAYLOAD_FIELDS.items():
        if name in data and not isinstance(data[name], kind):
            raise PayloadError(f"the payload's {name!r} has the wrong type")
    if not data.get("task") or not data.get("backend"):
        raise PayloadError("the payload names no task or no backend")


# -- values -> JSON ------------------------------------------------------------------


def to_json_value(value: Any, what: str) -> Any:
    """``value`` as it will come back from storage (tuples -> lists, int keys -> str).

    Raises ``InvalidTaskArguments`` naming ``what`` when the value has no JSON form.
    """
    try:
        return json.loads(VALUE_ENCODER.encode(normalize_json(value)))
    except (TypeError, ValueError) as exc:
        raise InvalidTaskArguments(
            f"{what} cannot be stored as JSON ({type(value).__name__}): {exc}"
        ) from None
    except RecursionError:  # e.g. lists nested 20,000 deep: no JSON reader would take it back
        raise InvalidTaskArguments(f"{what} is nested too deeply to be stored as JSON") from None


def encode_arguments(
    args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """Normalise args/kwargs the way Django does, checking each one before anything is sent.

    The common case is one pass through JSON for all values, without normalize_json:
    whatever the encoder accepts (dict, list, tuple, str, int, float, bool, None and
    their subclasses), normalize_json would pass on for it to encode the same way.
    Anything else (bytes, other mappings or sequences, a bad value) takes the
    long way, one value at a time, so that the error names the argument.
    """
    if not args and not kwargs:
        return [], {}
    try:
        values = json.loads(VALUE_ENCODER.encode([*args, *kwargs.values()]))
    except Exception:
        return encode_each(args, kwargs)
    return values[: len(args)], dict(zip(kwargs, values[len(args) :], strict=True))


def encode_each(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """``encode_arguments`` one value at a time: the first that cannot be stored raises."""
    return (
        [to_json_value(value, f"positional argument {i}") for i, value in enumerate(args)],
        {
            name: to_json_value(value, f"keyword argument {name!r}")
            for name, value in kwargs.items()
        },
    )


# -- times -----------------------------------------------------------------------------


def from_server_us(us: int | None, use_tz: bool | None = None) -> datetime | None:
    """A row timestamp (server µs) as Django shows times: aware UTC, or naive when USE_TZ=False.

    ``use_tz``: settings.USE_TZ when the caller has it at hand (reading a setting
    costs more than the conversion itself).
    """
    moment = from_us(us)
    if moment is None:
        return None
    if use_tz is None:
        use_tz = settings.USE_TZ
    return moment if use_tz else timezone.make_naive(moment)


def due_ms(run_after: datetime | None) -> int:
    """Absolute Unix ms of ``run_after`` (0: now). Naive values are in the current time zone."""
    if run_after is None:
        return 0
    if timezone.is_naive(run_after):
        run_after = timezone.make_aware(run_after)
    return max(0, to_ms(run_after))


def parse_run_after(text: str) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise PayloadError(f"the row's run_after is not an ISO datetime: {text[:40]!r}") from None


# -- module path -> Task object (never an import of a path from a row) -------------------

_discovery_lock = threading.RLock()  # a tasks module may read a result while imported
_discovered: set[str] = set()


def loaded_task(path: str) -> AnyTask | None:
    """The Task object at ``path`` if its module is loaded already, else None.

    Only ``sys.modules`` and the namespaces' own ``__dict__`` are read: no import,
    no module ``__getattr__`` hook (which could import lazily). The object must be
    a Task whose own module path is ``path`` (an alias of another task does not count).
    """
    parts = path.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    for cut in range(len(parts) - 1, 0, -1):
        obj: Any = sys.modules.get(".".join(parts[:cut]))
        if obj is None:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, "__dict__", {}).get(name)
        if isinstance(obj, Task) and obj.module_path == path:
            return obj
        return None
    return None


def discover_tasks(modules: Iterable[str] = ()) -> None:
    """Import every installed app's ``tasks`` module and ``modules``, once per process."""
    wanted = {"<apps>", *modules}
    with _discovery_lock:
        if wanted <= _discovered:
            return
        if "<apps>" not in _discovered:
            autodiscover_modules("tasks")
            _discovered.add("<apps>")
        for name in sorted(wanted - _discovered):
            import_module(name)
            _discovered.add(name)


def resolve_task(path: str, modules: Iterable[str] = ()) -> AnyTask:
    """The Task object named ``path``; ``UnknownTask`` for anything else.

    Not loaded yet: its module is imported if it lies inside an installed app
    (see :mod:`echomq_django.discovery`); else the apps' ``tasks`` modules and
    ``modules`` (settings) are, once.
    """
    task = loaded_task(path)
    if task is None:
        module = app_module(path)
        try:
            with _discovery_lock:
                if module is None or not import_app_module(module):
                    discover_tasks(modules)
        except Exception as exc:
            raise UnknownTask(
                f"task {path!r} is unknown here, and loading the tasks modules failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        task = loaded_task(path)
    if task is None:
        raise UnknownTask(
            f"{path!r} is not a Task object loaded in this process: only functions "
            "decorated with @task in a module of an installed app (or in a module "
            "listed in the backend's TASK_MODULES) are ever run"
        )
    return task


# -- row -> TaskResult ----------------------------------------------------------------------


def rebuild_task(job: Job, payload: Payload, modules: Iterable[str] = ()) -> AnyTask:
    """The Task as it was enqueued: the loaded task with the row's per-call values."""
    return _rebuild(
        payload.task,
        tuple(modules),
        job.priority,
        job.queue,
        payload.backend,
        job.run_after,
        payload.takes_context,
        payload.idempotency_key,
    )


@lru_cache(maxsize=1024)
def _rebuild(
    path: str,
    modules: tuple[str, ...],
    priority: int,
    queue_name: str,
    backend: str,
    run_after: str,
    takes_context: bool,
    idempotency_key: str | None,
) -> AnyTask:
    """Cached: a worker meets the same few task signatures over and over, and building
    a Task runs the backend's whole validation (most of a no-op job's cost). Tasks are
    frozen, so one instance can serve every job; failures are not cached."""
    changes: dict[str, Any] = {
        "priority": priority,
        "queue_name": queue_name,
        "backend": backend,
        "run_after": parse_run_after(run_after),
        "takes_context": takes_context,
    }
    if idempotency_key is not None:
        changes["idempotency_key"] = idempotency_key
    try:
        return replace(resolve_task(path, modules), **changes)
    except (InvalidTask, TypeError, ImproperlyConfigured) as exc:  # the last: no such backend
        raise PayloadError(f"task {path!r} cannot be rebuilt from its row: {exc}") from exc


def task_result(job: Job, payload: Payload, task: AnyTask) -> AnyTaskResult:
    """The framework's view of a row, field by field."""
    use_tz = settings.USE_TZ
    finished = job.state in ("completed", "dead")
    result = TaskResult(
        task=task,
        id=job.id,
        status=STATUS_OF_STATE[job.state],
        enqueued_at=from_server_us(job.enqueued_at, use_tz),
        started_at=from_server_us(job.started_at, use_tz),
        last_attempted_at=from_server_us(job.last_attempted_at, use_tz),
        finished_at=from_server_us(job.finished_at, use_tz) if finished else None,
        args=payload.args,
        kwargs=payload.kwargs,
        backend=payload.backend,
        errors=task_errors(job) if job.errors else [],  # most rows have none: no parse
        worker_ids=list(job.worker_ids),
    )
    if job.state == "completed":
        try:
            value = json.loads(job.result or "null")
        except ValueError:
            raise PayloadError(f"the result of job {job.id} is not JSON") from None
        object.__setattr__(result, "_return_value", value)
    return result


def task_errors(job: Job) -> list[TaskError]:
    return [
        TaskError(
            exception_class_path=str(error.get("exception_class_path", "")),
            traceback=str(error.get("traceback", "")),
        )
        for error in job.error_list
        if isinstance(error, dict)
    ]
