"""The one way the engine talks to the server: EVALSHA first, SCRIPT LOAD on NOSCRIPT.

A script's body crosses the wire once per server (when the server answers
NOSCRIPT); every other call sends only its SHA1. Script errors come back as
typed exceptions. redis-py's automatic command retry is switched off: re-sending
a transition whose reply was lost could run it twice, so the caller (the worker
loop, the reaper) decides what a lost connection means.

On a cluster, some calls go straight to the node a key's slot maps to (pipelines,
the worker's wire, the idle wait), where redis-py cannot notice that the map is
stale. Each of them reports a failure that may mean the map changed (a lost
node, READONLY, UNBLOCKED: a failover) to ``topology_changed``, which reads the
map again, so the next call goes to the node that serves the slot now.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

import redis
from redis.exceptions import NoScriptError

from . import spans
from .clients import READ_ERRORS, client_from_url
from .connections import evalsha, exchange, exchange_commands, exchange_many, own_connections
from .error_map import plain, translate_error
from .errors import ScriptError, ServerUnavailable
from .script import Call, Script
from .url import CLUSTER_SCHEMES, mask_url

logger = logging.getLogger("echomq.connector")

# Callers import these from here: the connector is the engine's one door to the server.
__all__ = [
    "CLUSTER_SCHEMES", "READ_ERRORS", "Call", "Connector", "mask_url", "plain", "translate_error",
]  # fmt: skip

# A node's answer that it does not (or cannot now) serve the slot: a failover, a reshard.
# redis-py types the errors it knows; UNBLOCKED (a blocking read a failover ended) it does not.
NODE_ERRORS = (
    redis.ConnectionError, redis.TimeoutError, OSError, redis.exceptions.ReadOnlyError,
    redis.exceptions.ClusterDownError, redis.exceptions.MasterDownError,
    redis.exceptions.TryAgainError,
)  # fmt: skip
TOPOLOGY_READ_S = 0.25  # the slot map is read again at most this often


def may_have_moved(exc: BaseException) -> bool:
    """``exc`` may mean the cluster's slot map changed: the node is gone or no longer a
    primary (a redirect, ASK/MOVED, is followed where it is met, not here)."""
    return isinstance(exc, NODE_ERRORS) or str(exc).startswith("UNBLOCKED")


class Connector:
    """A client plus the script dispatch. One per process is enough: it is thread-safe."""

    def __init__(self, client: redis.Redis | redis.RedisCluster, url: str = "") -> None:
        self.client = client
        self.url = url
        self.is_cluster = isinstance(client, redis.RedisCluster)
        self._connections = own_connections(client)
        self.script_loads = 0
        # SHA -> how many times this connector loaded it. A call notes the count
        # before it is sent; on NOSCRIPT it loads only if the count has not moved,
        # so threads that meet NOSCRIPT together send the body once, not once each.
        self._loaded: dict[str, int] = {}
        self._loads_lock = threading.RLock()
        self._topology_lock = threading.Lock()
        self._topology_read = 0.0  # monotonic: when the slot map was last read again

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Connector:
        """Connect from ``redis://``, ``rediss://``, ``unix://`` or ``redis+cluster://``.

        ``options`` go to redis-py (``socket_timeout``, ``ssl_ca_certs``, ``username``,
        ``password``, ``health_check_interval``...). Nothing is sent until first use,
        except on a cluster: its client reads the slot map at once (ServerUnavailable,
        or AccessDenied, if it cannot).
        """
        return cls(client_from_url(url, **options), url)

    @property
    def safe_url(self) -> str:
        return mask_url(self.url)

    def run(self, script: Script, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
        """EVALSHA ``script``; on NOSCRIPT load it once and run it again by SHA."""
        if not spans.recording():
            return self._run(script, keys, args)
        with spans.script_span(script.name, keys):
            return self._run(script, keys, args)

    def _run(self, script: Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        try:
            loaded = self._loaded.get(script.sha, 0)
            try:
                return self._command(command)
            except NoScriptError:
                self._reload(script, loaded)
                return self._command(command)
        except Exception as exc:
            self.failed([exc])
            raise translate_error(exc) from exc

    def _command(self, command: tuple[Any, ...]) -> Any:
        if self._connections is None:
            return self.client.execute_command(*command)  # type: ignore[no-untyped-call]
        return self._connections.call(lambda conn: exchange(conn, command))

    def run_many(self, calls: Sequence[Call]) -> list[Any]:
        """Pipeline many script calls in one round trip.

        Returns one entry per call: the reply, or the typed exception instance for
        a call that failed (the others still ran). Calls that met NOSCRIPT did not
        run; their scripts are loaded and those calls alone are sent again.
        """
        if not calls:
            return []
        if not spans.recording():
            return self._run_many(calls)
        names = sorted({call.script.name for call in calls})
        with spans.script_span("+".join(names), calls[0].keys, len(calls)) as span:
            replies = self._run_many(calls)
            spans.note_refusals(span, replies)
            return replies

    def _run_many(self, calls: Sequence[Call]) -> list[Any]:
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
            self.failed([exc])
            raise translate_error(exc) from exc
        self.failed(replies)
        return [translate_error(r) if isinstance(r, Exception) else r for r in replies]

    def run_then(self, call: Call, command: tuple[Any, ...]) -> tuple[Any, Any]:
        """``call``, then ``command`` on the same connection, in one round trip.

        For WAIT and WAITAOF, which wait for the writes of their own connection.
        The script's reply is ``run``'s (a failed script raises its typed error); the
        command's is returned, an error reply as its typed exception (the script ran).
        On NOSCRIPT the script is loaded and both are sent again. On a cluster a call
        that meets MOVED/ASK (its slot is moving) did not run: ServerUnavailable.
        """
        if not spans.recording():
            return self._run_then(call, command)
        with spans.script_span(call.script.name, call.keys):
            return self._run_then(call, command)

    def _run_then(self, call: Call, command: tuple[Any, ...]) -> tuple[Any, Any]:
        try:
            loaded = self._loaded.get(call.script.sha, 0)
            replies = self._on_one_connection([evalsha(call), command], call.keys[0])
            if isinstance(replies[0], NoScriptError):
                self._reload(call.script, loaded)
                replies = self._on_one_connection([evalsha(call), command], call.keys[0])
        except Exception as exc:
            self.failed([exc])
            raise translate_error(exc) from exc
        self.failed(replies)
        if isinstance(replies[0], redis.exceptions.AskError):  # ASK, and MOVED (a subclass)
            raise ServerUnavailable(f"the slot of {call.keys[0]} is moving: {replies[0]}")
        if isinstance(replies[0], Exception):
            raise translate_error(replies[0])
        after = replies[1]
        return replies[0], translate_error(after) if isinstance(after, Exception) else after

    def _on_one_connection(self, commands: Sequence[tuple[Any, ...]], key: str) -> list[Any]:
        if self._connections is not None:
            return list(self._connections.call(lambda conn: exchange_commands(conn, commands)))
        client = self.client
        if isinstance(client, redis.RedisCluster):  # the node that serves the key
            client = client.get_node_from_key(key).redis_connection
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return list(pipe.execute(raise_on_error=False))

    def _pipeline(self, calls: Sequence[Call]) -> list[Any]:
        if self._connections is not None:
            return list(self._connections.call(lambda conn: exchange_many(conn, calls)))
        if isinstance(self.client, redis.RedisCluster):
            return self._cluster_pipeline(self.client, calls)
        return self._node_pipeline(self.client, calls)

    @staticmethod
    def _node_pipeline(client: redis.Redis, calls: Iterable[Call]) -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for call in calls:
            pipe.execute_command(*evalsha(call))
        return list(pipe.execute(raise_on_error=False))

    def _cluster_pipeline(self, cluster: redis.RedisCluster, calls: Sequence[Call]) -> list[Any]:
        """One plain pipeline per node (redis-py's cluster pipeline refuses EVALSHA).

        All keys of one call share a hash tag, so its first key names its node. A
        call that meets MOVED/ASK (resharding, failover) is sent again alone through
        the cluster client, which follows the redirect: it did not run the first time.
        """
        replies: list[Any] = [None] * len(calls)
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for i, call in enumerate(calls):
            node = cluster.get_node_from_key(call.keys[0])
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

    def line_for(self, key: str) -> Any:
        """A connection of the caller's own to the server (on a cluster, the node) that
        serves ``key``, made like the client's (TLS, ACL user, timeouts, protocol): for
        calls whose replies are read later, in order (a worker's wire). It connects on
        first use; the caller disconnects it."""
        client = self.client
        if isinstance(client, redis.RedisCluster):
            client = client.get_node_from_key(key).redis_connection
        pool = client.connection_pool
        return pool.connection_class(**pool.connection_kwargs)

    def node_of(self, key: str) -> str:
        """The name of the node that serves ``key`` ("" on a single server)."""
        if isinstance(self.client, redis.RedisCluster):
            return str(self.client.get_node_from_key(key).name)
        return ""

    def failed(self, replies: Iterable[Any]) -> None:
        """Calls sent straight to a node answered ``replies`` (errors among them, or an
        error raised): read a cluster's slot map again if one may mean it changed.
        Nothing to look at on a single server (every batch's replies pass here)."""
        if self.is_cluster and any(
            may_have_moved(r) for r in replies if isinstance(r, BaseException)
        ):
            self.topology_changed()

    def topology_changed(self) -> None:
        """Read the cluster's slot map again (at most every ``TOPOLOGY_READ_S``; a
        thread that finds another reading it goes on). A failure to read it (the
        failover is not over) is left to the next failed call to try again."""
        client = self.client
        if not isinstance(client, redis.RedisCluster) or not self._topology_lock.acquire(
            blocking=False
        ):
            return
        try:
            if time.monotonic() - self._topology_read < TOPOLOGY_READ_S:
                return
            self._topology_read = time.monotonic()
            client.nodes_manager.initialize()
        except Exception as exc:  # the failover is not over: the next failed call reads again
            logger.debug("reading the cluster's slot map again failed: %s", exc)
        finally:
            self._topology_lock.release()

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

    def drop_idle(self) -> None:
        """Close the connections no call is using (the next calls open fresh ones).

        After a lost connection, or at a shutdown: a failover or a network cut may have
        left them half-open, and a call on one would wait for the whole socket timeout.
        """
        client = self.client
        if isinstance(client, redis.RedisCluster):
            pools = [
                node.redis_connection.connection_pool
                for node in client.get_nodes()
                if node.redis_connection is not None
            ]
        else:
            pools = [client.connection_pool]
        for pool in pools:
            pool.disconnect(inuse_connections=False)
        if self._connections is not None:
            self._connections.drop_idle()

    def close(self) -> None:
        if self._connections is not None:
            self._connections.close()
        self.client.close()
