"""The one way the engine talks to the server: EVALSHA first, SCRIPT LOAD on NOSCRIPT.

A script's body crosses the wire once per server (when the server answers
NOSCRIPT); every other call sends only its SHA1. Script errors come back as
typed exceptions. redis-py's automatic command retry is switched off: re-sending
a transition whose reply was lost could run it twice, so the caller (the worker
loop, the reaper) decides what a lost connection means.
"""

# Over ~400 lines: the URL handling moved to url.py; what is left is the script dispatch, its
# own connection stack and the cluster pipeline, due to be split (issue 18).

from __future__ import annotations

import codecs
import os
import re
import ssl
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError
from redis.retry import Retry

from .errors import (
    AccessDenied,
    CancelRequested,
    EchoMQError,
    JobExists,
    JobNotFound,
    ScriptError,
    ServerOutOfMemory,
    ServerUnavailable,
    StaleToken,
    WrongState,
)
from .script import Script
from .url import mask_url, validate_url

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
# How long a reply may take before the call is ServerUnavailable. redis-py waits for
# ever by default: a half-open connection (no FIN: a dead NAT entry, a frozen host)
# would hang an enqueue in a web request, or a worker's lease renewals until the
# leases expired and the jobs ran twice. Scripts are bounded: replies take ms.
DEFAULT_SOCKET_TIMEOUT_S = 10.0
# Connection options redis-py's cluster client drops without a word (it hands its node
# connections a fixed list of keywords): carried to every node by the connection class.
NODE_CONNECTION_OPTIONS = ("health_check_interval", "ssl_min_version", "ssl_ciphers")
# How replies are decoded. Bytes that are not UTF-8 (planted by hand, or written by
# another client) come back as backslash escapes ('\xff'), never as an exception:
# every read of server data survives bytes it did not write. Writes stay strict: text
# that cannot be UTF-8 (a lone surrogate) is refused, never stored altered.
READ_ERRORS = "echomq.escape-undecodable"


def _escape_undecodable(exc: UnicodeError) -> tuple[str, int]:
    if isinstance(exc, UnicodeDecodeError):
        return codecs.backslashreplace_errors(exc)
    raise exc


codecs.register_error(READ_ERRORS, _escape_undecodable)

_ERROR_CODES: dict[str, type[EchoMQError]] = {
    "EMQSTALE": StaleToken,
    "EMQCANCEL": CancelRequested,
    "EMQNOTFOUND": JobNotFound,
    "EMQEXISTS": JobExists,
    "EMQSTATE": WrongState,
}
_CODE = re.compile(r"(EMQ[A-Z]+)\s+(.*?)(?:\s+script:.*)?$", re.DOTALL)
# A cluster refusing a call while it reconfigures: TRYAGAIN (a multi-key call while its
# slot migrates), CLUSTERDOWN, a slot no node serves, redirects past the client's limit.
# The call did not run; like a lost server, it is worth trying again later.
_DENIED = (
    redis.AuthenticationError,
    redis.exceptions.AuthenticationWrongNumberOfArgsError,
    redis.exceptions.NoPermissionError,
)
_CLUSTER_BUSY = (
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterError,
    redis.exceptions.SlotNotCoveredError,
)
# A primary demoted to a replica (a failover behind a fixed address) answers READONLY
# to a write: the call did not run either, and the new primary will take it.
_NOT_RUN = (*_CLUSTER_BUSY, redis.exceptions.ReadOnlyError)


@dataclass(frozen=True)
class Call:
    """One script invocation, for pipelining many in one round trip."""

    script: Script
    keys: Sequence[str]
    args: Sequence[Any]


def _cluster_client(url: str, options: dict[str, Any]) -> redis.RedisCluster:
    """redis-py's cluster client, with the NODE_CONNECTION_OPTIONS it would drop kept.

    They go into a connection class of our own, which every node's pool (a node
    found later by a failover or resharding too) builds its connections from.
    """
    carried = {k: options.pop(k) for k in NODE_CONNECTION_OPTIONS if k in options}
    if carried:
        scheme = urlsplit(url).scheme
        tls = scheme == "rediss"
        base = options.pop("connection_class", redis.SSLConnection if tls else redis.Connection)
        options["connection_class"] = _with_defaults(base, carried)
        url = "redis" + url[len(scheme) :]  # else the URL's scheme replaces the class
    try:
        return redis.RedisCluster.from_url(url, **options)
    except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
        # The cluster client reads the slot map at once: say where, without the secret.
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        denied = isinstance(translate_error(cause), AccessDenied)
        raise (AccessDenied if denied else ServerUnavailable)(f"{mask_url(url)}: {exc}") from exc


def _with_defaults(base: type[redis.Connection], defaults: dict[str, Any]) -> type:
    class NodeConnection(base):  # type: ignore[valid-type, misc]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{**defaults, **kwargs})

    return NodeConnection


def translate_error(exc: Exception) -> Exception:
    """Map a redis-py exception onto the engine's typed errors."""
    if isinstance(exc, EchoMQError):
        return exc
    if isinstance(exc, _DENIED) or isinstance(exc.__context__, ssl.SSLCertVerificationError):
        return AccessDenied(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, *_NOT_RUN)):
        return ServerUnavailable(f"{type(exc).__name__}: {exc}")
    message = str(exc)
    if isinstance(exc, redis.ResponseError):
        match = _CODE.search(message)
        if match and match.group(1) in _ERROR_CODES:
            return _ERROR_CODES[match.group(1)](match.group(2))
        # A script calling a command the ACL user may not run: the rights, not the script.
        if "ACL failure in script" in message or message.startswith("NOPERM"):
            return AccessDenied(message)
        # redis-py strips the "OOM" prefix and raises OutOfMemoryError (a ResponseError).
        if isinstance(exc, redis.exceptions.OutOfMemoryError) or message.startswith("OOM"):
            return ServerOutOfMemory(message)
        return ScriptError(message)
    return exc


def plain(command: Callable[[], Any]) -> Any:
    """A plain (non-script) command, its redis-py errors mapped as a script call's are."""
    try:
        return command()
    except Exception as exc:
        raise translate_error(exc) from exc


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


def _own_connections(client: redis.Redis | redis.RedisCluster) -> _Connections | None:
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


class Connector:
    """A client plus the script dispatch. One per process is enough: it is thread-safe."""

    def __init__(self, client: redis.Redis | redis.RedisCluster, url: str = "") -> None:
        self.client = client
        self.url = url
        self.is_cluster = isinstance(client, redis.RedisCluster)
        self._connections = _own_connections(client)
        self.script_loads = 0
        # SHA -> how many times this connector loaded it. A call notes the count
        # before it is sent; on NOSCRIPT it loads only if the count has not moved,
        # so threads that meet NOSCRIPT together send the body once, not once each.
        self._loaded: dict[str, int] = {}
        self._loads_lock = threading.RLock()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Connector:
        """Connect from ``redis://``, ``rediss://``, ``unix://`` or ``redis+cluster://``.

        ``options`` go to redis-py (``socket_timeout``, ``ssl_ca_certs``, ``username``,
        ``password``, ``health_check_interval``...). Nothing is sent until first use,
        except on a cluster: its client reads the slot map at once (ServerUnavailable,
        or AccessDenied, if it cannot).
        """
        validate_url(url)
        options.setdefault("decode_responses", True)
        # Bytes that are not UTF-8 decode as escapes, never fail a whole reply after its
        # script ran (a claim's jobs would be leased to nobody): see READ_ERRORS.
        options.setdefault("encoding_errors", READ_ERRORS)
        options.setdefault("retry", Retry(NoBackoff(), 0))
        options.setdefault("socket_connect_timeout", 5)
        options.setdefault("socket_timeout", DEFAULT_SOCKET_TIMEOUT_S)
        scheme = urlsplit(url).scheme
        if scheme in CLUSTER_SCHEMES or options.pop("cluster", False):
            # The cluster client re-sends a command after a lost connection (10 times by
            # default). With no retries it still follows MOVED/ASK and refreshes its slot
            # map on a failover; it only stops re-running a transition that may have run.
            plain = url.replace(scheme, CLUSTER_SCHEMES.get(scheme, scheme), 1)
            client: Any = _cluster_client(plain, options)
        else:
            client = redis.Redis.from_url(url, **options)
        return cls(client, url)

    @property
    def safe_url(self) -> str:
        return mask_url(self.url)

    def run(self, script: Script, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
        """EVALSHA ``script``; on NOSCRIPT load it once and run it again by SHA."""
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        try:
            loaded = self._loaded.get(script.sha, 0)
            try:
                return self._command(command)
            except NoScriptError:
                self._reload(script, loaded)
                return self._command(command)
        except Exception as exc:
            raise translate_error(exc) from exc

    def _command(self, command: tuple[Any, ...]) -> Any:
        if self._connections is None:
            return self.client.execute_command(*command)
        return self._connections.call(lambda conn: _exchange(conn, command))

    def run_many(self, calls: Sequence[Call]) -> list[Any]:
        """Pipeline many script calls in one round trip.

        Returns one entry per call: the reply, or the typed exception instance for
        a call that failed (the others still ran). Calls that met NOSCRIPT did not
        run; their scripts are loaded and those calls alone are sent again.
        """
        if not calls:
            return []
        try:
            loaded = {call.script.sha: self._loaded.get(call.script.sha, 0) for call in calls}
            replies = self._pipeline(calls)
            missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
            if missing:
                for script in {calls[i].script.sha: calls[i].script for i in missing}.values():
                    self._reload(script, loaded[script.sha])
                for i, reply in zip(missing, self._pipeline([calls[i] for i in missing])):
                    replies[i] = reply
        except Exception as exc:
            raise translate_error(exc) from exc
        return [translate_error(r) if isinstance(r, Exception) else r for r in replies]

    def run_then(self, call: Call, command: tuple[Any, ...]) -> tuple[Any, Any]:
        """``call``, then ``command`` on the same connection, in one round trip.

        For WAIT and WAITAOF, which wait for the writes of their own connection.
        The script's reply is ``run``'s (a failed script raises its typed error); the
        command's is returned, an error reply as its typed exception (the script ran).
        On NOSCRIPT the script is loaded and both are sent again. On a cluster a call
        that meets MOVED/ASK (its slot is moving) did not run: ServerUnavailable.
        """
        try:
            loaded = self._loaded.get(call.script.sha, 0)
            replies = self._on_one_connection([_evalsha(call), command], call.keys[0])
            if isinstance(replies[0], NoScriptError):
                self._reload(call.script, loaded)
                replies = self._on_one_connection([_evalsha(call), command], call.keys[0])
        except Exception as exc:
            raise translate_error(exc) from exc
        if isinstance(replies[0], redis.exceptions.AskError):  # ASK, and MOVED (a subclass)
            raise ServerUnavailable(f"the slot of {call.keys[0]} is moving: {replies[0]}")
        if isinstance(replies[0], Exception):
            raise translate_error(replies[0])
        after = replies[1]
        return replies[0], translate_error(after) if isinstance(after, Exception) else after

    def _on_one_connection(self, commands: Sequence[tuple[Any, ...]], key: str) -> list[Any]:
        if self._connections is not None:
            return self._connections.call(lambda conn: _exchange_commands(conn, commands))
        client = self.client
        if self.is_cluster:  # the node that serves the key, on one of its connections
            client = self.client.get_node_from_key(key).redis_connection
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)

    def _pipeline(self, calls: Sequence[Call]) -> list[Any]:
        if self._connections is not None:
            return self._connections.call(lambda conn: _exchange_many(conn, calls))
        if self.is_cluster:
            return self._cluster_pipeline(calls)
        return self._node_pipeline(self.client, calls)

    @staticmethod
    def _node_pipeline(client: redis.Redis, calls: Iterable[Call]) -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for call in calls:
            pipe.execute_command(*_evalsha(call))
        return pipe.execute(raise_on_error=False)

    def _cluster_pipeline(self, calls: Sequence[Call]) -> list[Any]:
        """One plain pipeline per node (redis-py's cluster pipeline refuses EVALSHA).

        All keys of one call share a hash tag, so its first key names its node. A
        call that meets MOVED/ASK (resharding, failover) is sent again alone through
        the cluster client, which follows the redirect: it did not run the first time.
        """
        replies: list[Any] = [None] * len(calls)
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for i, call in enumerate(calls):
            node = self.client.get_node_from_key(call.keys[0])
            by_node.setdefault(node.name, (node, []))[1].append(i)
        for node, indexes in by_node.values():
            results = self._node_pipeline(node.redis_connection, [calls[i] for i in indexes])
            for i, reply in zip(indexes, results):
                if isinstance(reply, redis.exceptions.AskError):  # ASK, and MOVED (a subclass)
                    reply = self._single(calls[i])
                replies[i] = reply
        return replies

    def _single(self, call: Call) -> Any:
        try:
            return self.client.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
        except redis.RedisError as exc:
            return exc

    def _reload(self, script: Script, loaded_before: int) -> None:
        """Load ``script`` after NOSCRIPT unless another thread loaded it since the call went out."""
        with self._loads_lock:
            if self._loaded.get(script.sha, 0) == loaded_before:
                self.load(script)

    def load(self, script: Script) -> None:
        """SCRIPT LOAD the body (on every primary of a cluster) and count it."""
        with self._loads_lock:
            sha = self.client.script_load(script.body)
            if isinstance(sha, dict):  # a cluster answers per node
                sha = next(iter(sha.values()))
            if sha != script.sha:
                raise ScriptError(
                    f"server hashed script {script.name} as {sha}, expected {script.sha}"
                )
            self._loaded[script.sha] = self._loaded.get(script.sha, 0) + 1
            self.script_loads += 1

    def ping(self) -> bool:
        try:
            return bool(self.client.ping())
        except Exception as exc:
            raise translate_error(exc) from exc

    def close(self) -> None:
        if self._connections is not None:
            self._connections.close()
        self.client.close()


def _exchange(conn: Any, command: tuple[Any, ...]) -> Any:
    conn.send_command(*command)
    return conn.read_response()


def _exchange_many(conn: Any, calls: Sequence[Call]) -> list[Any]:
    return _exchange_commands(conn, [_evalsha(call) for call in calls])


def _exchange_commands(conn: Any, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    conn.send_packed_command(conn.pack_commands(commands))
    return [_reply(conn) for _ in commands]


def _evalsha(call: Call) -> tuple[Any, ...]:
    return ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)


def _reply(conn: Any) -> Any:
    """The next reply on ``conn``; an error reply is returned, not raised (the others still count)."""
    try:
        return conn.read_response()
    except redis.ResponseError as exc:
        return exc
