"""A task path read from a row, to the Task object it names.

A row is data anyone with write access to the server can plant, so a path is
resolved only to a ``Task`` object: one already loaded, one in a module inside
an installed app (imported then), or one in each app's ``tasks`` module or the
backend's ``TASK_MODULES``. Django lets a task live in any module of an app
(``myapp.jobs``, ``myapp.tasks.emails``); a path outside every installed app
(``os.system``, ``antigravity.fly``) is never imported. Whatever gets imported,
nothing named by a row runs unless it is a Task whose own module path is the row's.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from importlib import import_module
from typing import Any

from django.apps import apps
from django.utils.module_loading import autodiscover_modules

from .compat import AnyTask, Task
from .exceptions import UnknownTask


def app_module(path: str) -> str | None:
    """The module of task path ``path`` if it lies inside an installed app's package.

    The module is all of the path but its last part (Django's tasks are module-level
    functions). Dunder parts (``__main__``, ``__init__``) never name a module to import.
    """
    parts = path.split(".")
    if len(parts) < 2 or not all(p.isidentifier() and not p.startswith("__") for p in parts):
        return None
    module = ".".join(parts[:-1])
    for config in apps.get_app_configs():
        if module == config.name or module.startswith(config.name + "."):
            return module
    return None


def import_app_module(module: str) -> bool:
    """Import ``module`` (``app_module`` checked it lies inside an installed app).

    False when no such module exists; any other error of its import is the task
    module's own bug, raised for the caller to report.
    """
    try:
        import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
            raise
        return False
    return True


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


def path_problem(task: AnyTask, modules: Iterable[str] = ()) -> str:
    """Why no worker could ever find ``task`` by the path its rows hold ("" when one can).

    A worker finds a task by its module path alone (``resolve_task``). A lambda, or a
    function given to ``task()`` under another name (``send = task(_send)``), has a path
    naming no Task of its function even in the process enqueuing it; a task of a module
    imported under a second name (``tasks`` beside ``shop.tasks``, when the app's folder
    is on ``sys.path``) has a path a worker does not import, where the first name (in an
    installed app, or in ``modules``: the backend's TASK_MODULES) is one it does. Each of
    their jobs would be refused by every worker, after the enqueue said it was stored."""
    path = task.module_path
    # A Task of another function there (its module reloaded since) is no problem: a
    # worker runs the function that name holds now, as for every job.
    if loaded_task(path) is None:
        return (
            f"{path!r} names no Task, and a worker finds a task by that path "
            "alone: decorate a module-level function with @task where it is defined, "
            "under its own name"
        )
    module = task.func.__module__
    modules = tuple(modules)
    twin = None if worker_imports(path, modules) else imported_twin(module, modules)
    if twin:
        return (
            f"{path!r} is in module {module!r}, which is also loaded as {twin!r}, the "
            f"name a worker imports: import the task from {twin!r}"
        )
    return ""


def worker_imports(path: str, modules: tuple[str, ...]) -> bool:
    """A worker imports the module of task path ``path`` by that name (see ``resolve_task``)."""
    return app_module(path) is not None or path.rpartition(".")[0] in modules


def imported_twin(module: str, modules: tuple[str, ...]) -> str | None:
    """Another name of ``module``'s file in ``sys.modules`` that a worker imports, if any."""
    file = module_file(sys.modules.get(module))
    if not file:
        return None
    for name, other in list(sys.modules.items()):
        same_file = name != module and module_file(other) == file
        if same_file and worker_imports(f"{name}.task", modules):
            return name
    return None


def module_file(module: object) -> str | None:
    """A loaded module's file, read from its namespace: a lazy module's ``__getattr__``
    hook (which may import, or raise) is never called."""
    namespace = getattr(module, "__dict__", None)
    file = namespace.get("__file__") if isinstance(namespace, dict) else None
    return file if isinstance(file, str) else None


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
