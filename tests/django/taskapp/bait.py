"""Inside the installed test app, but holding no Task: importing it leaves a mark
(``$ECHOMQ_BAIT_MARKER``), which is allowed; calling anything in it is not."""

from __future__ import annotations

import os
from pathlib import Path


def leave_mark(what: str) -> None:
    path = os.environ.get("ECHOMQ_BAIT_MARKER")
    if path:
        with Path(path).open("a") as f:
            f.write(what + "\n")


leave_mark("imported")


def plain_function(*args, **kwargs) -> None:
    leave_mark("called plain_function")
