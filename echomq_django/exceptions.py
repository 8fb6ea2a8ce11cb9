"""The Django layer's errors, in one place; every one is an engine ``EchoMQError`` too.

So a caller may catch everything EchoMQ raises with one class, as the admin's
pages and the ``echomq`` command do. Each keeps the built-in base it had
(``ValueError``, ``TypeError``): generic callers that treat bad input as such
still do. The engine's own errors are in ``echomq_django.engine.errors``; the
dev server's in ``echomq_django.devserver.errors`` (that package must import
without Django).

Two errors stay where they are raised: ``execution.NonJSONReturnValue`` and
``execution.ReturnValueTooLarge`` name a task's failure in the row's error list
by their dotted path, which stored rows and their readers already hold.
"""

from __future__ import annotations

from .compat import InvalidTask
from .engine.errors import EchoMQError, InvalidSchedule


class InvalidTaskArguments(EchoMQError, InvalidTask, TypeError, ValueError):
    """An argument (or return value) that cannot be stored as JSON; nothing was written.

    Both a ``TypeError`` and a ``ValueError``, as Django's ``normalize_json`` raises one
    or the other (a type with no JSON form; a value such as bytes that are not UTF-8):
    code written against Django's own backends catches it either way.
    """


class PayloadError(EchoMQError, ValueError):
    """A row's payload that cannot be turned into a Task call: the job must never run."""


class UnknownTask(PayloadError):
    """The row names something that is not a Task object loaded in this process."""


class UnknownScheduleTask(InvalidSchedule):
    """A schedule names something that is not a task the worker would run."""


class MalformedSchedules(InvalidSchedule):
    """SCHEDULES, or one of its entries, is not a dict of known keys."""
