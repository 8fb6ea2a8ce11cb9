"""Django system checks for EchoMQ, and the server checks that workers print at start-up.

Configuration (run by every ``manage.py`` command that runs checks)::

    echomq.E001  settings.ECHOMQ is not a dict
    echomq.E002  settings.ECHOMQ has a key EchoMQ does not know (a typo is silently ignored otherwise)
    echomq.E003  the ECHOMQ URL has a scheme the connector cannot use
    echomq.E005  a queue name in ECHOMQ QUEUES cannot be a queue name
    echomq.E007  ECHOMQ DURABLE_ENQUEUE is not a valid setting
    echomq.W001  no ECHOMQ URL: the default redis://127.0.0.1:6379/0 is used
    echomq.W002  the server does not answer PING

Each TASKS entry of the EchoMQ backend is checked by the backend itself
(``EchoMQBackend.check``, run by Django's tasks check): echomq.E004 unknown
OPTIONS keys, echomq.E005 invalid QUEUES, echomq.E006 bad option values.

The reachability probe is a warning, not an error: a web process whose queue
server is briefly down should still start (enqueue then fails loudly), and
``migrate`` must not depend on the queue server.

Deployment (``manage.py check --deploy``; also :func:`server_warnings`)::

    echomq.W010  the server persists nothing (neither AOF nor RDB): a restart loses every job
    echomq.W011  maxmemory-policy is not noeviction: the server may evict job rows under pressure
    echomq.W012  the server's configuration could not be read
    echomq.W013  AOF is off and RDB snapshots are on: a crash loses what came after the last one
    echomq.W014  DURABLE_ENQUEUE asks for more than the server has (replicas, AOF)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import redis
from django.conf import settings
from django.core import checks

from . import conf
from .engine.connector import CLUSTER_SCHEMES, Connector
from .engine.errors import InvalidJobOptions, InvalidQueueName, InvalidURL
from .engine.keyspace import validate_queue_name
from .engine.url import mask_url, validate_url

URL_SCHEMES = {"redis", "rediss", "unix", *CLUSTER_SCHEMES}
TAG = "echomq"


# ---------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------


@checks.register(TAG)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """ECHOMQ's shape, its URL and its queue names."""
    raw = getattr(settings, "ECHOMQ", {})
    if not isinstance(raw, Mapping):
        return [
            checks.Error(
                f"settings.ECHOMQ must be a dict, not {type(raw).__name__}.",
                hint='e.g. ECHOMQ = {"URL": "redis://127.0.0.1:6379/0"}',
                id="echomq.E001",
            )
        ]
    messages = [*_unknown_keys(raw), *_url_messages(raw), *_durability_messages()]
    messages += _queue_messages(raw.get("QUEUES", ["default"]), "settings.ECHOMQ['QUEUES']")
    return messages


@checks.register(TAG)
def check_server(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The configured server answers PING (skipped when the settings are unusable)."""
    if _settings_unusable():
        return []
    try:
        conf.get_connector().ping()
    except Exception as exc:  # any failure to talk to the server is the finding
        return [
            checks.Warning(
                f"The EchoMQ server at {conf.get_settings().safe_url} does not answer: {exc}",
                hint="Start the server, or point settings.ECHOMQ['URL'] at a running one. "
                "Jobs cannot be enqueued or run until it answers.",
                id="echomq.W002",
            )
        ]
    return []


def _unknown_keys(raw: Mapping[str, Any]) -> list[checks.CheckMessage]:
    unknown = sorted(set(raw) - conf.KNOWN_KEYS)
    if not unknown:
        return []
    return [
        checks.Error(
            f"settings.ECHOMQ has unknown keys: {', '.join(map(repr, unknown))}.",
            hint=f"Known keys: {', '.join(sorted(conf.KNOWN_KEYS))}.",
            id="echomq.E002",
        )
    ]


def _url_messages(raw: Mapping[str, Any]) -> list[checks.CheckMessage]:
    if "URL" not in raw:
        return [
            checks.Warning(
                f"settings.ECHOMQ has no URL: EchoMQ uses {conf.DEFAULT_URL}.",
                hint='Set ECHOMQ = {"URL": ...}, e.g. from an ECHOMQ_URL environment variable.',
                id="echomq.W001",
            )
        ]
    url = raw["URL"]
    # Never the URL itself: it holds the password (mask_url hides it, whatever it holds).
    shown = mask_url(url) if isinstance(url, str) else f"a {type(url).__name__}"
    scheme = urlsplit(url).scheme if isinstance(url, str) else None
    try:
        if scheme not in URL_SCHEMES:
            raise InvalidURL(f"its scheme is not one of {', '.join(sorted(URL_SCHEMES))}")
        validate_url(url)
    except InvalidURL as exc:
        return [
            checks.Error(
                f"settings.ECHOMQ['URL'] ({shown}) is not a URL EchoMQ can connect to: {exc}.",
                hint="e.g. redis://user:password@host:6379/0, with the password percent-quoted "
                "(urllib.parse.quote(password, safe='')).",
                id="echomq.E003",
            )
        ]
    return []


def _durability_messages() -> list[checks.CheckMessage]:
    try:
        conf.get_settings().durability()
    except (InvalidJobOptions, TypeError) as exc:
        return [
            checks.Error(
                f"settings.ECHOMQ['DURABLE_ENQUEUE']: {exc}.",
                hint='e.g. {"REPLICAS": 1, "LOCAL": True, "TIMEOUT": 1.0}, or None.',
                id="echomq.E007",
            )
        ]
    return []


def _queue_messages(queues: object, where: str) -> list[checks.CheckMessage]:
    if isinstance(queues, str) or not isinstance(queues, Iterable):
        return [
            checks.Error(
                f"{where} must be a list of queue names, not {type(queues).__name__}.",
                hint='e.g. ["default", "emails"]',
                id="echomq.E005",
            )
        ]
    messages: list[checks.CheckMessage] = []
    for name in queues:
        try:
            validate_queue_name(name)
        except InvalidQueueName as exc:
            messages.append(
                checks.Error(
                    f"{where}: {exc}.",
                    hint="Queue names become part of server keys: letters, digits, "
                    "'.', '_' and '-', at most 100 characters.",
                    id="echomq.E005",
                )
            )
    return messages


def _settings_unusable() -> bool:
    """True when check_settings finds an error that makes a connection attempt meaningless."""
    return any(m.id in ("echomq.E001", "echomq.E003", "echomq.E007") for m in check_settings())


# ---------------------------------------------------------------------------------------
# The server (check --deploy, and workers at start-up)
# ---------------------------------------------------------------------------------------


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
    for who, client in primaries(connector):
        try:
            findings += _node_findings(who, client)
        except redis.RedisError as exc:
            findings.append(
                Finding(
                    "echomq.W012",
                    f"{who}: its configuration could not be read: {exc}",
                    "Allow INFO to the EchoMQ user, or check persistence and "
                    "maxmemory-policy on the server by hand.",
                )
            )
    return findings


@checks.register(TAG, deploy=True)
def check_server_deploy(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``check --deploy``: the server findings as warnings (echomq.W010-W012)."""
    if _settings_unusable() or check_server():  # unusable settings, or W002 said it all
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
    for who, client in primaries(connector):
        try:
            replicas = int(client.info("replication").get("connected_slaves", 0))
            aof = int(client.info("persistence").get("aof_enabled", 0))
        except redis.RedisError:
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


def primaries(connector: Connector) -> list[tuple[str, Any]]:
    """(who, client) per primary: "The server", or "Node host:port" on a cluster."""
    client = connector.client
    if not isinstance(client, redis.RedisCluster):  # connector.is_cluster, as a type guard
        return [("The server", client)]
    nodes = client.get_primaries()
    return [(f"Node {node.name}", client.get_redis_connection(node)) for node in nodes]


def _node_findings(who: str, client: Any) -> list[Finding]:
    findings = []
    if not int(client.info("persistence").get("aof_enabled", 0)):
        save = _rdb_schedule(client)
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
    policy = client.info("memory").get("maxmemory_policy", "noeviction")
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


def _rdb_schedule(client: Any) -> str | None:
    """The ``save`` setting ('' when RDB snapshots are off), or None when CONFIG is refused."""
    try:
        return str(client.config_get("save").get("save", ""))
    except redis.ResponseError:
        return None
