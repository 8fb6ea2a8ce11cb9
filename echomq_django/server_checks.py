"""What about the queue server can lose jobs: ``manage.py check --deploy``, and the
warnings every worker prints at start-up (:func:`server_warnings`).

Checks::

    echomq.W010  the server persists nothing (neither AOF nor RDB): a restart loses every job
    echomq.W011  maxmemory-policy is not noeviction: the server may evict job rows under pressure
    echomq.W012  the server's configuration could not be read
    echomq.W013  AOF is off and RDB snapshots are on: a crash loses what came after the last one
    echomq.W014  DURABLE_ENQUEUE asks for more than the server has (replicas, AOF)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core import checks

from . import conf
from .checks import TAG, check_server, settings_unusable
from .engine.connector import Connector
from .engine.errors import EchoMQError
from .engine.nodes import Node, primaries


@dataclass(frozen=True, slots=True)
class Finding:
    """One server warning: a check id, the message workers print, and what to do about it."""

    id: str
    message: str
    hint: str


def server_warnings(connector: Connector) -> list[str]:
    """What about this server can lose jobs: no persistence, an evicting memory policy.

    Never raises: a server that cannot be read gives one warning that says why,
    so a worker can print it and go on to its own connection handling.
    """
    return [f.message for f in server_findings(connector)]


def server_findings(connector: Connector) -> list[Finding]:
    """Each primary's persistence and eviction policy (every primary of a cluster)."""
    findings: list[Finding] = []
    for node in primaries(connector):
        try:
            findings += _node_findings(node)
        except EchoMQError as exc:
            findings.append(
                Finding(
                    "echomq.W012",
                    f"{node.who}: its configuration could not be read: {exc}",
                    "Allow INFO to the EchoMQ user, or check persistence and "
                    "maxmemory-policy on the server by hand.",
                )
            )
    return findings


@checks.register(TAG, deploy=True)
def check_server_deploy(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``check --deploy``: the server findings as warnings (echomq.W010-W012)."""
    if settings_unusable() or check_server():  # unusable settings, or W002 said it all
        return []
    connector = conf.get_connector()
    findings = [*server_findings(connector), *durability_findings(connector)]
    return [checks.Warning(f.message, hint=f.hint, id=f.id) for f in findings]


def durability_findings(connector: Connector) -> list[Finding]:
    """DURABLE_ENQUEUE that this server cannot meet: every enqueue would fail (W014)."""
    durability = conf.get_settings().durability()
    if durability is None:
        return []
    findings = []
    for node in primaries(connector):
        who = node.who
        try:
            replicas = int(node.info("replication").get("connected_slaves", 0))
            aof = int(node.info("persistence").get("aof_enabled", 0))
        except EchoMQError:
            continue  # W012 says the configuration could not be read
        if replicas < durability.replicas:
            findings.append(
                Finding(
                    "echomq.W014",
                    f"{who} has {replicas} connected replica(s); DURABLE_ENQUEUE waits for "
                    f"{durability.replicas}: every enqueue would raise NotDurable.",
                    "Add replicas, or lower DURABLE_ENQUEUE['REPLICAS'].",
                )
            )
        if durability.local and not aof:
            findings.append(
                Finding(
                    "echomq.W014",
                    f"{who} has AOF off; DURABLE_ENQUEUE LOCAL waits for its fsync "
                    "(WAITAOF): every enqueue would fail.",
                    "Turn AOF on (appendonly yes), or set DURABLE_ENQUEUE['LOCAL'] to False.",
                )
            )
    return findings


def _node_findings(node: Node) -> list[Finding]:
    who, findings = node.who, []
    if not int(node.info("persistence").get("aof_enabled", 0)):
        save = node.rdb_schedule()
        if save is None:
            findings.append(
                Finding(
                    "echomq.W010",
                    f"{who} has AOF off and its RDB schedule cannot be read (CONFIG GET "
                    "refused): it may persist nothing, and a restart would lose every job.",
                    "Turn AOF on (appendonly yes, appendfsync everysec), or confirm that "
                    "your provider persists the data.",
                )
            )
        elif not save.strip():
            findings.append(
                Finding(
                    "echomq.W010",
                    f"{who} persists nothing (appendonly no, save ''): a restart loses every job.",
                    "Turn AOF on: appendonly yes, appendfsync everysec.",
                )
            )
        else:
            findings.append(
                Finding(
                    "echomq.W013",
                    f"{who} has AOF off and RDB snapshots only (save '{save}'): a crash "
                    "loses every job enqueued, and every transition made, since the last "
                    "snapshot.",
                    "Turn AOF on: appendonly yes, appendfsync everysec (at most about a "
                    "second lost) or always.",
                )
            )
    policy = node.info("memory").get("maxmemory_policy", "noeviction")
    if policy != "noeviction":
        findings.append(
            Finding(
                "echomq.W011",
                f"{who} has maxmemory-policy {policy}: under memory pressure it may "
                "evict job rows and queue sets, and jobs vanish.",
                "Set maxmemory-policy noeviction: a full server then refuses new jobs "
                "(ServerOutOfMemory) instead of dropping old ones.",
            )
        )
    return findings
