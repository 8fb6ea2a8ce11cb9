"""Bait for the corrupt-row tests: importing this module, or calling anything in it, leaves a mark.

Planted rows name these functions as their task. A worker must never import
this module (it is in no TASK_MODULES and no app's ``tasks``) nor call them:
the marker file (``$ECHOMQ_EVIL_MARKER``) must never appear.
"""

from __future__ import annotations

import os
from pathlib import Path

from echomq_django.compat import task


def leave_mark(what: str) -> None:
    path = os.environ.get("ECHOMQ_EVIL_MARKER")
    if path:
        with Path(path).open("a") as f:
            f.write(what + "\n")


leave_mark("imported")


def write_marker(*args, **kwargs) -> None:
    leave_mark("called write_marker")


@task
def evil_task(*args, **kwargs) -> None:
    leave_mark("ran evil_task")
