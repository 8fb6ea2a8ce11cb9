"""Whole-keyspace snapshots: the evidence that a fault left the server before or after.

``dump`` reads every key with its type and exact value; ``normalized`` blanks
what depends on the moment a script ran (server-clock timestamps and deadline
scores), so that two runs of the same transition from the same state compare
equal; ``save`` / ``restore`` put a keyspace back byte for byte (DUMP/RESTORE).
``places`` checks invariant 2 (one place per job, and the row says which).
"""

from __future__ import annotations

import re
from typing import Any

import redis

from echomq_django.engine.keyspace import STATES, QueueKeys

Dump = dict[str, tuple[str, Any]]

#: Row fields that hold a server-clock reading.
TIME_FIELDS = frozenset(
    {"enqueued_at", "started_at", "last_attempted_at", "finished_at", "lease_deadline", "due_ms"}
)
#: Places whose scores are deadlines on the server clock (pending scores are exact).
TIMED_PLACES = ("scheduled", "active", "completed", "dead")
_MINUTE_KEY = re.compile(r":tp:\d+$")


_ERROR_AT = re.compile(r'"at_us":\d+')


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def dump(client: redis.Redis) -> Dump:
    """Every key of the server with its type and value (no TTLs)."""
    out: Dump = {}
    for raw in client.scan_iter(count=1000):
        key = _text(raw)
        kind = _text(client.type(raw))
        if kind == "hash":
            value: Any = {_text(k): _text(v) for k, v in client.hgetall(raw).items()}
        elif kind == "zset":
            value = [(_text(m), s) for m, s in client.zrange(raw, 0, -1, withscores=True)]
        elif kind == "set":
            value = sorted(_text(m) for m in client.smembers(raw))
        elif kind == "list":
            value = [_text(v) for v in client.lrange(raw, 0, -1)]
        else:
            value = _text(client.get(raw))
        out[key] = (kind, value)
    return out


def normalized(snapshot: Dump) -> Dump:
    """The snapshot with clock readings blanked (two runs of one script compare equal)."""
    out: Dump = {}
    for key, (kind, value) in snapshot.items():
        if kind == "hash":
            value = {f: ("T" if f in TIME_FIELDS else v) for f, v in value.items()}
            if "errors" in value:  # each error record carries when it was recorded
                value["errors"] = _ERROR_AT.sub('"at_us":T', value["errors"])
            if "ended" in value:  # a retry's answer ends with its due time
                value["ended"] = value["ended"].rsplit(" ", 1)[0] + " T"
        elif kind == "zset" and key.rsplit(":", 1)[-1] in TIMED_PLACES:
            value = [(m, "T") for m, _ in value]
        out[_MINUTE_KEY.sub(":tp:T", key)] = (kind, value)
    return out


def save(client: redis.Redis) -> list[tuple[bytes, int, bytes]]:
    """The keyspace as (key, pttl, DUMP payload) triples."""
    return [(k, max(0, client.pttl(k)), client.dump(k)) for k in client.scan_iter(count=1000)]


def restore(client: redis.Redis, saved: list[tuple[bytes, int, bytes]]) -> None:
    """Replace the whole keyspace with ``saved`` (FLUSHALL keeps the script cache)."""
    client.flushall()
    for key, ttl, payload in saved:
        client.restore(key, ttl, payload, replace=True)


def places(client: redis.Redis, queue: str) -> list[str]:
    """Every breach of "one place per job, and the row says which"; empty when sound."""
    keys = QueueKeys.of(queue)
    where: dict[str, list[str]] = {}
    for state in STATES:
        for member in client.zrange(keys.state_set(state), 0, -1):
            where.setdefault(_text(member), []).append(state)
    problems = [f"{jid} is in {', '.join(sets)}" for jid, sets in where.items() if len(sets) > 1]
    prefix = keys.job_prefix
    rows = {_text(k)[len(prefix) :] for k in client.scan_iter(match=prefix + "*", count=1000)}
    for jid in sorted(rows | set(where)):
        state = _text(client.hget(prefix + jid, "state") or b"")
        sets = where.get(jid, [])
        if jid not in rows:
            problems.append(f"{jid} is in {sets} but has no row")
        elif sets != [state]:
            problems.append(f"{jid} row says {state!r} but it is in {sets or 'no place'}")
    return problems
