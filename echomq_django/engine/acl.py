"""The least privilege an EchoMQ process needs, as an ACL rule list.

Commands run inside a script are checked against the caller's ACL too, so the
list holds both what the client sends and what the scripts call. The scripts'
part is read from the scripts themselves (every ``redis.call``/``redis.pcall``),
so it cannot drift from them; the client's part is the list below, one line per
sender, and ``tests/security/test_acl.py`` runs worker, reaper, admin and CLI as
that user and compares the server's own command statistics with it. Keys are
limited to the ``emq:`` prefix. Use it as::

    ACL SETUSER echomq on >password resetkeys resetchannels <rules>

and connect with ``redis://echomq:password@host:6379/0`` (any db: ``select`` is
granted). On a cluster, run it on every node (ACLs are per node) and connect
with ``redis+cluster://...``.
"""

from __future__ import annotations

import re
from functools import cache

from . import script
from .keyspace import PREFIX

# What the client itself sends, by sender.
CLIENT_COMMANDS = (
    # every connection: redis-py's handshake (its name and version), the db of the URL
    "client|setinfo", "select",
    # the transitions: EVALSHA, and the body once per server on NOSCRIPT
    "evalsha", "script|load",
    # the worker's idle wait on its queues' wake keys, and handing a wake-up on
    "bzpopmin", "zadd",
    # the queue registry (register, list), rows and the admin's search
    "sadd", "smembers", "hgetall", "type", "getrange", "exists",
    # the throughput chart (the server clock, per-minute counters)
    "time", "hmget",
    # the worker registry: heartbeat (hset, pexpire, zadd), list (zrange, hgetall), leave
    "hset", "pexpire", "zrange", "zrem", "del",
    # echomq tail: the queues' job event streams (the workers write them in a script)
    "xread",
    # start-up banners and deploy checks (persistence, maxmemory-policy), echomq ping
    "info", "ping", "script|exists",
)  # fmt: skip

# Sent only in some set-ups: granted, but a run without that set-up does not send them.
CONDITIONAL_COMMANDS = {
    "hello": "RESP3 (OPTIONS protocol=3)",
    "client|setname": "OPTIONS client_name",
    "asking": "a cluster whose slot is migrating: the client follows an ASK redirect",
    "cluster|slots": "redis-py's cluster client reads the slot map",
    "command": "redis-py's cluster client reads the command table (key positions)",
    "wait": 'ECHOMQ["DURABLE_ENQUEUE"] with REPLICAS: the replicas\' acknowledgement',
    "waitaof": 'ECHOMQ["DURABLE_ENQUEUE"] with LOCAL: the AOF fsync acknowledgement',
}

# Commands a server older than this does not know: ACL SETUSER refuses to grant them.
SINCE = {"client|setinfo": (7, 2), "waitaof": (7, 2)}

_CALL = re.compile(r"""redis\.p?call\(\s*['"]([A-Za-z]+)['"]""")


@cache
def script_commands() -> frozenset[str]:
    """Every command a transition script calls, read from the scripts' own text."""
    return frozenset(name.lower() for s in script.all_scripts() for name in _CALL.findall(s.body))


def granted_commands(server: tuple[int, int] = (7, 2)) -> frozenset[str]:
    """What the rules grant on a server of version ``server`` (Redis 7.0 knows fewer)."""
    every = frozenset(CLIENT_COMMANDS) | frozenset(CONDITIONAL_COMMANDS) | script_commands()
    return frozenset(c for c in every if SINCE.get(c, (0, 0)) <= server)


def worker_acl_rules(prefix: str = PREFIX, server: tuple[int, int] = (7, 2)) -> str:
    """The rule list for a worker, reaper, web process or operator CLI.

    ``server``: the (major, minor) version of Redis the rules are for; Valkey counts
    as 7.2 and later. Give ``(7, 0)`` for Redis 7.0, which has no CLIENT SETINFO
    (redis-py's handshake sends it and goes on without) and no WAITAOF.
    """
    commands = sorted(granted_commands(server))
    return " ".join([f"~{prefix}:*", "resetchannels", "-@all", *(f"+{c}" for c in commands)])
