"""A real N-master Redis/Valkey Cluster on loopback (no replicas), for tests and benchmarks.

Each node is an :class:`EmbeddedServer` with ``--cluster-enabled yes``; the slots
are split evenly with CLUSTER ADDSLOTSRANGE and the nodes joined with CLUSTER
MEET. :meth:`EmbeddedCluster.start` returns once every node says
``cluster_state:ok`` and agrees on the slot map.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from ..engine.errors import ServerUnavailable
from .binary import find_server_binary
from .config import server_dir
from .errors import ClusterError, ServerCommandError
from .server import EmbeddedServer

CLUSTER_SLOTS = 16384


class EmbeddedCluster:
    """``masters`` cluster-enabled servers in one directory (a temporary one by default)."""

    def __init__(
        self,
        masters: int = 3,
        *,
        binary: str | None = None,
        host: str = "127.0.0.1",
        dir: str | os.PathLike[str] | None = None,
        node_timeout_ms: int = 5000,
        extra_args: Sequence[str] = (),
    ) -> None:
        if masters < 1:
            raise ValueError("a cluster needs at least one master")
        self.binary = binary or find_server_binary()
        self.host = host
        self._dir, self._owns_dir = server_dir(dir, "echomq-cluster-")
        self.nodes: list[EmbeddedServer] = []
        for i in range(masters):
            node_dir = self._dir / f"node{i}"
            self.nodes.append(
                EmbeddedServer(
                    binary=self.binary,
                    host=host,
                    dir=node_dir,
                    extra_args=[
                        "--cluster-enabled", "yes",
                        "--cluster-config-file", str(node_dir / "nodes.conf"),
                        "--cluster-node-timeout", str(node_timeout_ms),
                        "--cluster-require-full-coverage", "yes",
                        *extra_args,
                    ],
                )
            )  # fmt: skip

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def urls(self) -> list[str]:
        """Startup node URLs, one per master."""
        return [node.url for node in self.nodes]

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [(node.host, node.port) for node in self.nodes]

    def slot_ranges(self) -> list[tuple[int, int]]:
        n = len(self.nodes)
        bounds = [CLUSTER_SLOTS * i // n for i in range(n + 1)]
        return [(bounds[i], bounds[i + 1] - 1) for i in range(n)]

    def start(self, timeout: float = 30.0) -> EmbeddedCluster:
        try:
            for node in self.nodes:
                node.start()
            first = self.nodes[0]
            for node, (lo, hi) in zip(self.nodes, self.slot_ranges(), strict=True):
                if not self._owns(node, lo):
                    node.command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
            for node in self.nodes[1:]:
                first.command("CLUSTER", "MEET", node.host, node.port)
            self.wait_ok(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    @staticmethod
    def _owns(node: EmbeddedServer, slot: int) -> bool:
        # After a restart with a kept nodes.conf the slots are already assigned.
        return any(s[0] <= slot <= s[1] for s in node.command("CLUSTER", "SLOTS") or [])

    def cluster_info(self, node: EmbeddedServer) -> dict[str, str]:
        text: str = node.command("CLUSTER", "INFO") or ""
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def wait_ok(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        n = len(self.nodes)
        last: list[dict[str, str]] = []
        while time.monotonic() < deadline:
            try:
                last = [self.cluster_info(node) for node in self.nodes]
                if all(
                    info.get("cluster_state") == "ok"
                    and info.get("cluster_known_nodes") == str(n)
                    and info.get("cluster_slots_assigned") == str(CLUSTER_SLOTS)
                    and info.get("cluster_slots_ok") == str(CLUSTER_SLOTS)
                    for info in last
                ):
                    return
            except (ServerCommandError, ServerUnavailable):
                pass
            time.sleep(0.05)
        states = [(i.get("cluster_state"), i.get("cluster_known_nodes")) for i in last]
        tails = "\n".join(node.log_tail(10) for node in self.nodes)
        raise ClusterError(f"cluster not ok after {timeout:.0f}s: {states}\n{tails}")

    def stop(self, timeout: float = 10.0, *, cleanup: bool = True) -> None:
        for node in self.nodes:
            node.stop(timeout, cleanup=cleanup)
        if cleanup and self._owns_dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
