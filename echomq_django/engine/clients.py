"""A redis-py client from a URL, set up the way every engine call needs it.

Replies decode with escapes instead of failing, redis-py's own command retry is off
(re-sending a transition whose reply was lost could run it twice), replies have a
deadline, and a cluster client keeps the connection options it would otherwise drop.
"""

from __future__ import annotations

import codecs
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .error_map import translate_error
from .errors import AccessDenied, ServerUnavailable
from .url import CLUSTER_SCHEMES, mask_url, validate_url

# How long a reply may take before the call is ServerUnavailable. redis-py waits for
# ever by default: a half-open connection (no FIN: a dead NAT entry, a frozen host)
# would hang an enqueue in a web request, or a worker's lease renewals until the
# leases expired and the jobs ran twice. Scripts are bounded: replies take ms.
DEFAULT_SOCKET_TIMEOUT_S = 10.0
# Connection options redis-py's cluster client drops without a word (it hands its node
# connections a fixed list of keywords): carried to every node by the connection class.
NODE_CONNECTION_OPTIONS = ("health_check_interval", "ssl_min_version", "ssl_ciphers")
# How replies are decoded. Bytes that are not UTF-8 (planted by hand, or written by
# another client) come back as backslash escapes ('\xff'), never as an exception:
# every read of server data survives bytes it did not write. Writes stay strict: text
# that cannot be UTF-8 (a lone surrogate) is refused, never stored altered.
READ_ERRORS = "echomq.escape-undecodable"


def _escape_undecodable(exc: UnicodeError) -> tuple[str, int]:
    if isinstance(exc, UnicodeDecodeError):
        text, end = codecs.backslashreplace_errors(exc)
        return str(text), end
    raise exc


codecs.register_error(READ_ERRORS, _escape_undecodable)


def client_from_url(url: str, **options: Any) -> redis.Redis | redis.RedisCluster:
    """The client for ``url`` (see ``Connector.from_url``)."""
    validate_url(url)
    options.setdefault("decode_responses", True)
    # Bytes that are not UTF-8 decode as escapes, never fail a whole reply after its
    # script ran (a claim's jobs would be leased to nobody): see READ_ERRORS.
    options.setdefault("encoding_errors", READ_ERRORS)
    options.setdefault("retry", Retry(NoBackoff(), 0))
    options.setdefault("socket_connect_timeout", 5)
    options.setdefault("socket_timeout", DEFAULT_SOCKET_TIMEOUT_S)
    scheme = urlsplit(url).scheme
    if scheme in CLUSTER_SCHEMES or options.pop("cluster", False):
        # The cluster client re-sends a command after a lost connection (10 times by
        # default). With no retries it still follows MOVED/ASK and refreshes its slot
        # map on a failover; it only stops re-running a transition that may have run.
        plain = url.replace(scheme, CLUSTER_SCHEMES.get(scheme, scheme), 1)
        return _cluster_client(plain, options)
    return redis.Redis.from_url(url, **options)


def _cluster_client(url: str, options: dict[str, Any]) -> redis.RedisCluster:
    """redis-py's cluster client, with the NODE_CONNECTION_OPTIONS it would drop kept.

    They go into a connection class of our own, which every node's pool (a node
    found later by a failover or resharding too) builds its connections from.
    """
    carried = {k: options.pop(k) for k in NODE_CONNECTION_OPTIONS if k in options}
    if carried:
        scheme = urlsplit(url).scheme
        tls = scheme == "rediss"
        base = options.pop("connection_class", redis.SSLConnection if tls else redis.Connection)
        options["connection_class"] = _with_defaults(base, carried)
        url = "redis" + url[len(scheme) :]  # else the URL's scheme replaces the class
    try:
        return redis.RedisCluster.from_url(url, **options)
    except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
        # The cluster client reads the slot map at once: say where, without the secret.
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        denied = isinstance(translate_error(cause), AccessDenied)
        raise (AccessDenied if denied else ServerUnavailable)(f"{mask_url(url)}: {exc}") from exc


def _with_defaults(base: type[redis.Connection], defaults: dict[str, Any]) -> type:
    class NodeConnection(base):  # type: ignore[valid-type, misc]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{**defaults, **kwargs})

    return NodeConnection
