"""What the server says about itself: the reads that checks, ``echomq ping``, the
worker's banner and the test plugin need, per primary on a cluster.

They go through the engine's error map like every other call (a refused INFO is
``AccessDenied``, a lost server ``ServerUnavailable``), so no code above the engine
holds a raw client: a test fails if any does (tests/house).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from .connector import Connector, plain
from .errors import EchoMQError


@dataclass(frozen=True)
class Node:
    """One primary, named for people: "The server", or "Node host:port" on a cluster."""

    who: str
    _client: Any

    def info(self, section: str) -> dict[str, Any]:
        """One INFO section, parsed."""
        return dict(self._read(lambda: self._client.info(section)))

    def rdb_schedule(self) -> str | None:
        """The ``save`` setting ('' when RDB snapshots are off), or None when CONFIG GET
        is refused (managed servers often rename or forbid it)."""
        try:
            reply = self._read(lambda: self._client.config_get("save"))
        except EchoMQError:
            return None
        return str(reply.get("save", ""))

    def _read(self, command: Callable[[], Any]) -> Any:
        return plain(command)


def primaries(connector: Connector) -> list[Node]:
    """Every primary: one for a single server, each master of a cluster."""
    client = connector.client
    if not isinstance(client, redis.RedisCluster):  # connector.is_cluster, as a type guard
        return [Node("The server", client)]
    nodes = plain(client.get_primaries)
    return [Node(f"Node {node.name}", client.get_redis_connection(node)) for node in nodes]


def server_version(connector: Connector) -> str:
    """``valkey 8.1.1`` / ``redis 7.0.15``, or why it is unknown (never raises: a banner)."""
    try:
        info = primaries(connector)[0].info("server")
    except Exception as exc:
        return f"unknown ({type(exc).__name__}: {exc})"
    if "valkey_version" in info:
        return f"valkey {info['valkey_version']}"
    return f"redis {info.get('redis_version', '?')}"


def server_time_us(connector: Connector) -> int:
    """The server's clock in µs: the clock every lease and due time is measured on."""
    seconds, micros = plain(connector.client.time)
    return int(seconds) * 1_000_000 + int(micros)


def cached_scripts(connector: Connector, shas: Sequence[str]) -> list[bool]:
    """Whether the server holds each script already (else the first call loads it)."""
    return [bool(x) for x in plain(lambda: connector.client.script_exists(*shas))]


def flush_database(connector: Connector) -> None:
    """Empty the connector's database (every node of a cluster). For the test plugin's
    isolated queues only: nothing in the runtime calls it."""
    plain(connector.client.flushdb)
