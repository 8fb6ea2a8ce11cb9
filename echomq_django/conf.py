"""Django settings -> engine objects, one connector per process.

``settings.ECHOMQ`` (all keys optional)::

    ECHOMQ = {
        "URL": "redis://127.0.0.1:6379/0",   # redis://, rediss://, unix://, redis+cluster://
        "OPTIONS": {},                       # passed to redis-py (socket_timeout, ssl_ca_certs...)
        "CLUSTER": False,                    # use redis-py's cluster client
        "QUEUES": ["default"],               # queues the reaper always sweeps
        "MAX_PAYLOAD": 524288,               # bytes; larger payloads are refused at enqueue
        "METRICS_TOKEN": None,               # bearer token of the Prometheus view (see metrics.py)
        "SCHEDULES": {},                     # periodic jobs (see schedules.py)
    }

The connector is built lazily on first use and rebuilt when the settings change
(``setting_changed``), never at import time: ``@task`` builds backends while
``tasks.py`` is imported, long before anything should connect.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from .engine.connector import Connector, mask_url
from .engine.jobs import DEFAULT_MAX_PAYLOAD, Jobs

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

    @property
    def safe_url(self) -> str:
        return mask_url(self.url)


KNOWN_KEYS = {"URL", "OPTIONS", "CLUSTER", "QUEUES", "MAX_PAYLOAD", "METRICS_TOKEN", "SCHEDULES"}


def get_settings() -> EchoMQSettings:
    raw = getattr(settings, "ECHOMQ", {}) or {}
    return EchoMQSettings(
        url=raw.get("URL", DEFAULT_URL),
        options=dict(raw.get("OPTIONS", {})),
        cluster=bool(raw.get("CLUSTER", False)),
        queues=tuple(raw.get("QUEUES", ("default",))),
        max_payload=int(raw.get("MAX_PAYLOAD", DEFAULT_MAX_PAYLOAD)),
        metrics_token=raw.get("METRICS_TOKEN") or None,
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
                _jobs = Jobs(Connector.from_url(conf.url, **options), max_payload=conf.max_payload)
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
