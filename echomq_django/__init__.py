"""EchoMQ for Django: a leased job queue on Redis/Valkey.

Every job transition is one atomic Lua script. The engine (``echomq_django.engine``)
imports nothing from Django; the rest of this package adapts it to Django.
"""

__version__ = "0.1.0"

__all__ = ["Retry", "task"]


def __getattr__(name: str) -> object:
    """``from echomq_django import task, Retry``, without importing Django's Tasks
    framework when the package itself is imported (INSTALLED_APPS loading)."""
    if name == "task":
        from .compat import task

        return task
    if name == "Retry":
        from .retries import Retry

        return Retry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
