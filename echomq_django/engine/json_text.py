"""JSON read from stored text: a row's payload, errors or result, a registry entry,
an outbox row. Anyone with write access to the server (or the database) can plant
that text, so reading it has one failure, whatever the bytes.
"""

from __future__ import annotations

import json
from typing import Any


def read_json(text: str | bytes) -> Any:
    """The value of ``text``; ``ValueError`` when it is not JSON or is nested deeper
    than the parser goes (``json`` raises RecursionError for that, which no caller of
    a plain parse expects)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply to be read") from None
