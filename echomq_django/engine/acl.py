"""The least privilege an EchoMQ process needs, as an ACL rule list.

Commands run inside a script are checked against the caller's ACL too, so the
list holds both what the client sends (EVALSHA, SCRIPT LOAD on NOSCRIPT, the
blocking wait, the registries) and what the scripts call. Keys are limited to
the ``emq:`` prefix. Use it as::

    ACL SETUSER echomq on >password resetkeys resetchannels <rules>

and connect with ``redis://echomq:password@host:6379/0``. On a cluster, run it on
every node (ACLs are per node) and connect with ``redis+cluster://...``.
"""

from __future__ import annotations

from .keyspace import PREFIX

# What the client itself sends (besides connection set-up).
CLIENT_COMMANDS = (
    "evalsha", "script|load", "script|exists", "ping", "info", "time", "client|setinfo",
    "client|setname", "hello", "bzpopmin", "zpopmin",
    # registries of queues and workers, reads of rows and pages
    "sadd", "smembers", "hgetall", "hmget", "hset", "expire", "pexpire", "zadd", "zrem",
    "zrange", "zrangebyscore", "zremrangebyscore", "del", "exists", "zcard",
    # redis-py's cluster client reads the slot map and the command table (key positions)
    "cluster|slots", "command",
)  # fmt: skip

# What the transition scripts call.
SCRIPT_COMMANDS = (
    "get", "set", "del", "exists", "incr", "incrby", "expire",
    "hget", "hmget", "hset", "hdel", "hincrby", "hgetall",
    "zadd", "zrem", "zpopmin", "zrange", "zrangebyscore", "zcount", "zcard", "zscore",
    "time", "type",
)  # fmt: skip


def worker_acl_rules(prefix: str = PREFIX) -> str:
    """The rule list for a worker, reaper, web process or operator CLI."""
    commands = sorted(set(CLIENT_COMMANDS) | set(SCRIPT_COMMANDS))
    return " ".join([f"~{prefix}:*", "resetchannels", "-@all", *(f"+{c}" for c in commands)])
