"""Which modules a task path read from a row may make a worker import.

Django lets a task live in any module of an app (``myapp.jobs``,
``myapp.tasks.emails``), so a worker that meets a task path it has not loaded
imports its module, but only one inside an installed app's package. A path
outside every installed app (``os.system``, ``antigravity.fly``) is never
imported. Whatever gets imported, :func:`echomq_django.payload.resolve_task`
still runs only a ``Task`` object whose own module path is the row's.
"""

from __future__ import annotations

from importlib import import_module

from django.apps import apps


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
