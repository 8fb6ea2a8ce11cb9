"""Helpers over the suite's 3-master Valkey Cluster (``valkey_cluster``).

``SPREAD`` are queue names whose hash tags land on the three different masters
of ``valkey_cluster`` (``tests/cluster/test_connector.py`` checks it), so a test over
them exercises every node.
"""

from __future__ import annotations

from redis.crc import key_slot

from echomq_django.devserver import EmbeddedCluster, EmbeddedServer
from echomq_django.engine.keyspace import QueueKeys

SPREAD = ("emails", "default", "billing")  # slots 3728, 5718, 12682: masters 0, 1, 2


def slot_of(queue: str) -> int:
    return key_slot(QueueKeys.of(queue).base.encode())


def node_of(cluster: EmbeddedCluster, queue: str) -> EmbeddedServer:
    """The master that serves ``queue``'s slot, as the cluster itself says (CLUSTER SLOTS)."""
    slot = slot_of(queue)
    for lo, hi, (host, port, *_), *_ in cluster.nodes[0].command("CLUSTER", "SLOTS"):
        if lo <= slot <= hi:
            return next(n for n in cluster.nodes if (n.host, n.port) == (host, port))
    raise LookupError(f"slot {slot} is not served")


def migrate_keys(source: EmbeddedServer, target: EmbeddedServer, slot: int) -> int:
    """MIGRATE every key of ``slot`` from ``source`` to ``target``; how many were moved."""
    moved = 0
    while keys := source.command("CLUSTER", "GETKEYSINSLOT", slot, 100):
        source.command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *keys)
        moved += len(keys)
    return moved


def move_slot(source: EmbeddedServer, target: EmbeddedServer, slot: int) -> None:
    """The whole resharding of one slot between the two masters of a 2-master cluster."""
    source_id, target_id = (n.command("CLUSTER", "MYID") for n in (source, target))
    target.command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    source.command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    migrate_keys(source, target, slot)
    for node in (target, source):
        node.command("CLUSTER", "SETSLOT", slot, "NODE", target_id)


def blocked_clients(node: EmbeddedServer) -> int:
    info = node.command("INFO", "clients")
    return int(next(line for line in info.splitlines() if line.startswith("blocked_clients:"))[16:])


def info_field(node: EmbeddedServer, section: str, name: str) -> str:
    """One field of the node's INFO section."""
    text = node.command("INFO", section)
    return next(line.split(":", 1)[1] for line in text.splitlines() if line.startswith(name + ":"))
