"""Django settings -> engine objects, one connector per process.

``settings.ECHOMQ`` (all keys optional)::

    ECHOMQ = {
        "URL": "redis://127.0.0.1:6379/0",   # redis://, rediss://, unix://, redis+cluster://
        "OPTIONS": {},                       # passed to redis-py (socket_timeout, ssl_ca_certs...)
        "CLUSTER": False,                    # use redis-py's cluster client
        "QUEUES": ["default"],               # queues the reaper always sweeps
        "MAX_PAYLOAD": 524288,               # bytes; larger payloads are refused at enqueue
        "METRICS_TOKEN": None,               # bearer token of the Prometheus view (see metrics.py)
        "DURABLE_ENQUEUE": None,             # {"REPLICAS": n, "LOCAL": bool, "TIMEOUT": s}
        "SCHEDULES": {},                     # periodic jobs (see schedules.py)
        "LOG_FORMAT": "text",                # or "json": runworker / runreaper logs (logs.py)
    }

``DURABLE_ENQUEUE`` makes ``enqueue()`` return only once the job is on that many
replicas (WAIT) and, with ``LOCAL``, fsynced to the primary's AOF (WAITAOF);
``NotDurable`` when that is not confirmed within ``TIMEOUT`` (see engine/durable.py).

The connector is built lazily on first use and rebuilt when the settings change
(``setting_changed``), never at import time: ``@task`` builds backends while
``tasks.py`` is imported, long before anything should connect.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from .engine.connector import Connector
from .engine.durable import Durability, DurableJobs
from .engine.errors import InvalidJobOptions
from .engine.jobs import DEFAULT_MAX_PAYLOAD, Jobs
from .engine.url import mask_url

DEFAULT_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True)
class EchoMQSettings:
    # The URL and OPTIONS may hold a password: kept out of the repr (use ``safe_url``).
    url: str = field(default=DEFAULT_URL, repr=False)
    options: dict[str, Any] = field(default_factory=dict, repr=False)
    cluster: bool = False
    queues: tuple[str, ...] = ("default",)
    max_payload: int = DEFAULT_MAX_PAYLOAD
    metrics_token: str | None = field(default=None, repr=False)
    durable_enqueue: object = None  # the raw setting; ``durability()`` reads it

    def durability(self) -> Durability | None:
        """DURABLE_ENQUEUE as the engine takes it; ``InvalidJobOptions`` says what is wrong."""
        raw = self.durable_enqueue
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            raise InvalidJobOptions("DURABLE_ENQUEUE must be a dict or None")
        unknown = sorted(set(raw) - DURABLE_KEYS, key=str)
        if unknown:
            raise InvalidJobOptions(f"DURABLE_ENQUEUE has unknown keys: {unknown}")
        return Durability(
            replicas=raw.get("REPLICAS", 0),
            local=raw.get("LOCAL", False),
            timeout_s=raw.get("TIMEOUT", 1.0),
        )

    @property
    def safe_url(self) -> str:
        return mask_url(self.url)


KNOWN_KEYS = {
    "URL", "OPTIONS", "CLUSTER", "QUEUES", "MAX_PAYLOAD", "METRICS_TOKEN", "DURABLE_ENQUEUE",
    "SCHEDULES", "LOG_FORMAT",
}  # fmt: skip
DURABLE_KEYS = {"REPLICAS", "LOCAL", "TIMEOUT"}

# What a TASKS backend's OPTIONS["ENQUEUE_ON_COMMIT"] (and a task's enqueue_on_commit)
# accepts: exactly these values (1, "no" or "yes" are refused, not read as true).
# "outbox": written in the caller's transaction, relayed after the commit (outbox.py).
ENQUEUE_ON_COMMIT_VALUES: tuple[object, ...] = (False, True, "outbox")


def enqueue_on_commit_problem(value: object, name: str = "ENQUEUE_ON_COMMIT") -> str:
    """Why ``value`` is not an ENQUEUE_ON_COMMIT setting ("" when it is one); ``name``:
    what the message calls it (a task's ``enqueue_on_commit``)."""
    if any(
        type(value) is type(allowed) and value == allowed for allowed in ENQUEUE_ON_COMMIT_VALUES
    ):
        return ""
    shown = value if isinstance(value, (str, int, float)) else type(value).__name__
    allowed = " or ".join(repr(v) for v in ENQUEUE_ON_COMMIT_VALUES)
    return f"{name} must be {allowed}, not {str(shown)[:40]!r}"


def task_modules_problem(value: object) -> str:
    """Why ``value`` is not a TASK_MODULES setting ("" when it is one): a list of
    dotted module paths. A string would be read letter by letter, each a module."""
    if isinstance(value, (list, tuple)) and all(
        isinstance(path, str) and _MODULE_PATH.fullmatch(path) for path in value
    ):
        return ""
    shown = value if isinstance(value, (str, int, float)) else type(value).__name__
    return f"TASK_MODULES must be a list of dotted module paths, not {str(shown)[:40]!r}"


_MODULE_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def type_problems(raw: Mapping[str, Any]) -> list[str]:
    """What ECHOMQ holds of the wrong type ([] when nothing): OPTIONS not a dict, CLUSTER
    not a bool, MAX_PAYLOAD not a positive number of bytes (0 would refuse every job). The system
    check echomq.E008 reports them; ``get_settings`` raises the first."""
    problems = []
    options = raw.get("OPTIONS", {})
    if not isinstance(options, Mapping):
        problems.append(f"settings.ECHOMQ['OPTIONS'] must be a dict, not {type(options).__name__}")
    cluster = raw.get("CLUSTER", False)
    if not isinstance(cluster, bool):  # bool("false") is True
        problems.append(f"settings.ECHOMQ['CLUSTER'] must be True or False, not {cluster!r:.40}")
    size = raw.get("MAX_PAYLOAD", DEFAULT_MAX_PAYLOAD)
    try:  # int(): "524288" from the environment is fine
        positive = not isinstance(size, bool) and int(size) > 0
    except (TypeError, ValueError):
        positive = False
    if not positive:
        shown = size if isinstance(size, (str, int, float)) else type(size).__name__
        problems.append(
            "settings.ECHOMQ['MAX_PAYLOAD'] must be a positive number of bytes, "
            f"not {str(shown)[:40]!r}"
        )
    return problems


def get_settings() -> EchoMQSettings:
    """ECHOMQ read; ``ImproperlyConfigured`` when it is not a dict or holds a value of
    the wrong type (the system checks report the same, as E001 and E008)."""
    raw = getattr(settings, "ECHOMQ", {}) or {}
    if not isinstance(raw, Mapping):
        raise ImproperlyConfigured(f"settings.ECHOMQ must be a dict, not {type(raw).__name__}")
    problems = type_problems(raw)
    if problems:
        raise ImproperlyConfigured(problems[0])
    return EchoMQSettings(
        url=raw.get("URL", DEFAULT_URL),
        options=dict(raw.get("OPTIONS", {})),
        cluster=raw.get("CLUSTER", False),
        queues=tuple(raw.get("QUEUES", ("default",))),
        max_payload=int(raw.get("MAX_PAYLOAD", DEFAULT_MAX_PAYLOAD)),
        metrics_token=raw.get("METRICS_TOKEN") or None,
        durable_enqueue=raw.get("DURABLE_ENQUEUE"),
    )


_lock = threading.Lock()
_jobs: Jobs | None = None


def get_jobs() -> Jobs:
    """The process's engine API (connector built on first use)."""
    global _jobs
    if _jobs is None:
        with _lock:
            if _jobs is None:
                conf = get_settings()
                options = dict(conf.options)
                if conf.cluster:
                    options["cluster"] = True
                durability = conf.durability()  # a bad setting raises before connecting
                connector = Connector.from_url(conf.url, **options)
                if durability is None:
                    _jobs = Jobs(connector, max_payload=conf.max_payload)
                else:
                    _jobs = DurableJobs(connector, durability, max_payload=conf.max_payload)
    return _jobs


def get_connector() -> Connector:
    return get_jobs().connector


def reset() -> None:
    """Forget the connector (next use builds a new one from the current settings)."""
    global _jobs
    with _lock:
        old, _jobs = _jobs, None
    if old is not None:
        old.connector.close()


@receiver(setting_changed)
def _settings_changed(setting: str, **kwargs: Any) -> None:
    if setting in ("ECHOMQ", "TASKS"):
        reset()
