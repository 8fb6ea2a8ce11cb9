"""Django system checks for EchoMQ's settings, and whether its server answers.

Configuration (run by every ``manage.py`` command that runs checks)::

    echomq.E001  settings.ECHOMQ is not a dict
    echomq.E002  settings.ECHOMQ has a key EchoMQ does not know (a typo is silently ignored otherwise)
    echomq.E003  the ECHOMQ URL has a scheme the connector cannot use
    echomq.E005  a queue name in ECHOMQ QUEUES cannot be a queue name
    echomq.E007  ECHOMQ DURABLE_ENQUEUE is not a valid setting
    echomq.E008  ECHOMQ OPTIONS is not a dict, CLUSTER not a bool, or MAX_PAYLOAD not positive
    echomq.W001  no ECHOMQ URL: the default redis://127.0.0.1:6379/0 is used
    echomq.W002  the server does not answer PING
    echomq.W003  the ECHOMQ URL holds a secret that Django's error reports would show

Each TASKS entry of the EchoMQ backend is checked by the backend itself
(``EchoMQBackend.check`` with ``backend_checks.py``, run by Django's tasks check): echomq.E004 unknown
OPTIONS keys, echomq.E005 invalid QUEUES, echomq.E006 bad option values.

The reachability probe is a warning, not an error: a web process whose queue
server is briefly down should still start (enqueue then fails loudly), and
``migrate`` must not depend on the queue server.

The server's persistence, eviction policy and durability are checked by
``check --deploy`` (:mod:`echomq_django.server_checks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.core import checks

from . import conf
from .engine.errors import InvalidJobOptions, InvalidQueueName, InvalidURL
from .engine.keyspace import validate_queue_name
from .engine.url import mask_url, validate_url

TAG = "echomq"


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
    messages = [*_unknown_keys(raw), *_url_messages(raw), *_durability_messages(raw)]
    messages += [checks.Error(f"{p}.", id="echomq.E008") for p in conf.type_problems(raw)]
    messages += queue_messages(raw.get("QUEUES", ["default"]), "settings.ECHOMQ['QUEUES']")
    return messages


@checks.register(TAG)
def check_server(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The configured server answers PING (skipped when the settings are unusable)."""
    if settings_unusable():
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
    try:
        validate_url(url)
    except InvalidURL as exc:
        return [
            checks.Error(
                f"settings.ECHOMQ['URL'] ({shown}) is not a URL EchoMQ can connect to: {str(exc).rstrip('.')}.",
                hint="e.g. redis://user:password@host:6379/0, with the password percent-quoted "
                "(urllib.parse.quote(password, safe='')).",
                id="echomq.E003",
            )
        ]
    if shown != url and not _reports_mask_urls():
        return [
            checks.Warning(
                f"settings.ECHOMQ['URL'] ({shown}) holds a secret, and Django's error "
                "reports (the DEBUG 500 page, AdminEmailHandler's emails) show it: they "
                "hide settings by name, never URL.",
                hint=f'Set DEFAULT_EXCEPTION_REPORTER_FILTER = "{REPORTER_FILTER}".',
                id="echomq.W003",
            )
        ]
    return []


REPORTER_FILTER = "echomq_django.debug.SafeExceptionReporterFilter"


def _reports_mask_urls() -> bool:
    """Django's error reports use our filter (a filter of your own that masks URLs too:
    silence echomq.W003 in SILENCED_SYSTEM_CHECKS)."""
    return bool(settings.DEFAULT_EXCEPTION_REPORTER_FILTER == REPORTER_FILTER)


def _durability_messages(raw: Mapping[str, Any]) -> list[checks.CheckMessage]:
    try:
        conf.EchoMQSettings(durable_enqueue=raw.get("DURABLE_ENQUEUE")).durability()
    except (InvalidJobOptions, TypeError) as exc:
        return [
            checks.Error(
                f"settings.ECHOMQ['DURABLE_ENQUEUE']: {exc}.",
                hint='e.g. {"REPLICAS": 1, "LOCAL": True, "TIMEOUT": 1.0}, or None.',
                id="echomq.E007",
            )
        ]
    return []


def queue_messages(queues: object, where: str) -> list[checks.CheckMessage]:
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


def settings_unusable() -> bool:
    """True when check_settings finds an error that makes a connection attempt meaningless."""
    unusable = ("echomq.E001", "echomq.E003", "echomq.E007", "echomq.E008")
    return any(m.id in unusable for m in check_settings())
