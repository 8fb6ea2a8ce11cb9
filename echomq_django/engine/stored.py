"""What a job's key holds, whatever it is: for the pages that show a row as stored.

``Jobs.get`` reads a row as a job and raises ``CorruptRow`` when it cannot be
one. An operator looking at such a row needs the rest: which fields it has,
or that the key is not a HASH at all (a STRING planted at a row's name answers
every HGET with WRONGTYPE). These are plain reads, never a transition, and
their errors are the engine's typed ones like every other call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .connector import Connector, translate_error
from .keyspace import QueueKeys

# A planted value can be any size: a page shows at most this much of one.
SHOWN_CHARS = 10_000


@dataclass(frozen=True, slots=True)
class StoredRow:
    """A job key's type and content as stored: ``row`` whole, to be read as a job (a
    valid payload may be 512 KB: cut, it is no JSON), and ``fields``, the values cut at
    ``SHOWN_CHARS``, to be shown when it cannot be one."""

    type: str  # "hash" for a row; "none" when there is no key; "string", "list"...
    fields: list[tuple[str, str]]  # a hash's fields, or [("value", ...)] of a string
    row: dict[str, str]  # a hash's fields uncut ({} for any other type)

    @property
    def exists(self) -> bool:
        return self.type != "none"


def read_stored(connector: Connector, queue: str, job_id: str) -> StoredRow:
    """The key of job ``job_id`` as it is, in one round trip; never raises WRONGTYPE."""
    key = QueueKeys.of(queue).job(job_id)
    pipe = connector.client.pipeline(transaction=False)
    pipe.type(key)
    pipe.hgetall(key)
    pipe.getrange(key, 0, SHOWN_CHARS)
    try:
        kind, fields, text = pipe.execute(raise_on_error=False)
    except Exception as exc:
        raise translate_error(exc) from exc
    if isinstance(kind, Exception):
        raise translate_error(kind)
    if kind == "hash" and isinstance(fields, dict):
        return StoredRow(kind, sorted((name, cut(v)) for name, v in fields.items()), fields)
    if kind == "string" and isinstance(text, str):
        return StoredRow(kind, [("value", cut(text))], {})
    return StoredRow(kind, [], {})


def find_queue(connector: Connector, queues: Sequence[str], job_id: str) -> str | None:
    """The first of ``queues`` that has a key for ``job_id`` (an id does not name its queue)."""
    if not queues:
        return None
    pipe = connector.client.pipeline(transaction=False)
    for queue in queues:
        pipe.exists(QueueKeys.of(queue).job(job_id))
    try:
        found = pipe.execute()
    except Exception as exc:
        raise translate_error(exc) from exc
    return next((q for q, n in zip(queues, found, strict=True) if n), None)


def cut(value: str) -> str:
    """``value`` as a page shows it: at most ``SHOWN_CHARS``, then how long it was."""
    if len(value) <= SHOWN_CHARS:
        return value
    return value[:SHOWN_CHARS] + f" … ({len(value)} characters)"
