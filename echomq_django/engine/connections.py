"""This process's own connections for script calls, and the exchanges sent on them."""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import redis

from .script import Call


class _Connections:
    """This process's connections for script calls to one server: a lock-free LIFO stack.

    A call takes one, sends its command(s), reads the replies and puts it back.
    redis-py's own path (``client.evalsha``, ``pipeline()``) costs about 30 µs of
    CPU per call on top of the round trip (pool bookkeeping, metrics hooks, the
    retry wrapper): as much as the round trip itself on a local server. The
    connections are built from the client's pool settings (TLS, ACL user,
    password, timeouts, unix socket, ``max_connections``), and redis-py still
    does the socket work. A call that did not read its whole reply (a timeout, an
    interrupt) disconnects its connection, so a late reply is never read as the
    next call's. Like redis-py's pool, a connection is polled (about 1 µs) before
    each use, so one the server closed meanwhile (a restart, an idle timeout) is
    replaced instead of failing the call. After a fork the parent's are dropped.
    """

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self._pool = pool
        self._lock = threading.Lock()  # only around making one
        self._reset()

    def _reset(self) -> None:
        self._idle: deque[Any] = deque()
        self._all: weakref.WeakSet[Any] = weakref.WeakSet()  # idle and in use, for close()
        self._pid = os.getpid()

    def call(self, exchange: Callable[[Any], Any]) -> Any:
        """``exchange(connection)``: its sends and reads, on a connection of its own."""
        conn = self._take()
        try:
            return exchange(conn)
        except redis.ResponseError:  # an error reply was read whole: still in step
            raise
        except BaseException:
            conn.disconnect()  # a reply may still be on its way
            raise
        finally:
            self._idle.append(conn)  # deque.pop/append are atomic: no lock

    def _take(self) -> Any:
        if self._pid != os.getpid():  # forked: those sockets are the parent's
            self._reset()
        try:
            conn = self._idle.pop()
        except IndexError:
            return self._make()
        _drop_if_stale(conn)
        return conn

    def _make(self) -> Any:
        with self._lock:
            if len(self._all) >= self._pool.max_connections:
                raise redis.ConnectionError("Too many connections (max_connections)")
            conn = self._pool.connection_class(**self._pool.connection_kwargs)
            self._all.add(conn)
        return conn

    def drop_idle(self) -> None:
        """Disconnect the idle ones (each is taken while closed: deque.pop is atomic, so
        no call has it meanwhile; put back, it reconnects on its next use)."""
        taken = []
        for _ in range(len(self._idle)):
            try:
                taken.append(self._idle.pop())
            except IndexError:
                break
        for conn in taken:
            conn.disconnect()
            self._idle.append(conn)

    def close(self) -> None:
        """Disconnect them all, in use or not (as ``pool.disconnect()`` does)."""
        for conn in list(self._all):
            conn.disconnect()


def _drop_if_stale(conn: Any) -> None:
    """Disconnect a connection the server closed (or that holds a stray reply)."""
    try:
        if getattr(conn, "_sock", None) is not None and conn.can_read():
            conn.disconnect()
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        conn.disconnect()


def own_connections(client: redis.Redis | redis.RedisCluster) -> _Connections | None:
    """Connections of our own for script calls, where nothing of redis-py's pool is lost.

    Not on a cluster (the cluster client routes by slot), and not when the pool
    does more than hand out connections: a BlockingConnectionPool (it waits for a
    free one), RESP3 (push notifications the pool handles), a credential provider
    (the pool re-authenticates its connections).
    """
    pool = getattr(client, "connection_pool", None)
    if type(pool) is not redis.ConnectionPool:
        return None
    kwargs = pool.connection_kwargs
    if str(kwargs.get("protocol") or 2) == "3" or kwargs.get("credential_provider"):
        return None
    return _Connections(pool)


def exchange(conn: Any, command: tuple[Any, ...]) -> Any:
    conn.send_command(*command)
    return conn.read_response()


def exchange_many(conn: Any, calls: Sequence[Call]) -> list[Any]:
    return exchange_commands(conn, [evalsha(call) for call in calls])


def exchange_commands(conn: Any, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    conn.send_packed_command(conn.pack_commands(commands))
    return [_reply(conn) for _ in commands]


def evalsha(call: Call) -> tuple[Any, ...]:
    return ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)


def _reply(conn: Any) -> Any:
    """The next reply on ``conn``; an error reply is returned, not raised (the others still count)."""
    try:
        return conn.read_response()
    except redis.ResponseError as exc:
        return exc
