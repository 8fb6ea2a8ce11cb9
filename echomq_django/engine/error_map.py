"""How a redis-py exception becomes one of the engine's typed errors (``errors.py``).

One mapping for every call, script or plain: a caller handles ``StaleToken`` or
``ServerUnavailable``, never a redis-py class, whichever command met the problem.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable
from typing import Any

import redis

from .errors import (
    AccessDenied,
    CancelRequested,
    CorruptKey,
    EchoMQError,
    JobExists,
    JobNotFound,
    ScriptError,
    ServerOutOfMemory,
    ServerUnavailable,
    StaleToken,
    WrongState,
)

_ERROR_CODES: dict[str, type[EchoMQError]] = {
    "EMQSTALE": StaleToken,
    "EMQCANCEL": CancelRequested,
    "EMQNOTFOUND": JobNotFound,
    "EMQEXISTS": JobExists,
    "EMQSTATE": WrongState,
    "EMQCORRUPT": CorruptKey,
}
_CODE = re.compile(r"(EMQ[A-Z]+)\s+(.*?)(?:\s+script:.*)?$", re.DOTALL)
# A cluster refusing a call while it reconfigures: TRYAGAIN (a multi-key call while its
# slot migrates), CLUSTERDOWN, a slot no node serves, redirects past the client's limit.
# The call did not run; like a lost server, it is worth trying again later.
_DENIED = (
    redis.AuthenticationError,
    redis.exceptions.AuthenticationWrongNumberOfArgsError,
    redis.exceptions.NoPermissionError,
)
_CLUSTER_BUSY = (
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterError,
    redis.exceptions.SlotNotCoveredError,
)
# Error replies that say the command did not run and may later: another client's
# script is running (BUSY), a replica lost its primary (MASTERDOWN), too few replicas
# to write (NOREPLICAS). A NOSCRIPT that reaches here met a cache flushed again after
# the connector reloaded it. Like a lost server: sent again after a while, never a
# permanent failure (a completion dropped for one ran its job twice).
_NOT_RUN_REPLIES = ("BUSY ", "MASTERDOWN ", "NOREPLICAS ")
# A primary demoted to a replica (a failover behind a fixed address) answers READONLY
# to a write: the call did not run either, and the new primary will take it.
_NOT_RUN = (*_CLUSTER_BUSY, redis.exceptions.ReadOnlyError)


def translate_error(exc: Exception) -> Exception:
    """Map a redis-py exception onto the engine's typed errors."""
    if isinstance(exc, EchoMQError):
        return exc
    if isinstance(exc, _DENIED) or isinstance(exc.__context__, ssl.SSLCertVerificationError):
        return AccessDenied(f"{type(exc).__name__}: {exc}")
    # InvalidResponse: what answered does not speak RESP (an HTTP port, a proxy's page).
    if isinstance(
        exc,
        (redis.ConnectionError, redis.TimeoutError, redis.exceptions.InvalidResponse, *_NOT_RUN),
    ):
        return ServerUnavailable(f"{type(exc).__name__}: {exc}")
    message = str(exc)
    if isinstance(exc, redis.exceptions.NoScriptError) or (
        isinstance(exc, redis.ResponseError) and message.startswith(_NOT_RUN_REPLIES)
    ):
        return ServerUnavailable(f"not run: {message}")
    if isinstance(exc, redis.ResponseError):
        match = _CODE.search(message)
        if match and match.group(1) in _ERROR_CODES:
            return _ERROR_CODES[match.group(1)](match.group(2))
        # A script calling a command the ACL user may not run: the rights, not the script.
        if "ACL failure in script" in message or message.startswith("NOPERM"):
            return AccessDenied(message)
        # redis-py strips the "OOM" prefix and raises OutOfMemoryError (a ResponseError).
        if isinstance(exc, redis.exceptions.OutOfMemoryError) or message.startswith("OOM"):
            return ServerOutOfMemory(message)
        return ScriptError(message)
    return exc


def plain(command: Callable[[], Any]) -> Any:
    """A plain (non-script) command, its redis-py errors mapped as a script call's are."""
    try:
        return command()
    except Exception as exc:
        raise translate_error(exc) from exc
