"""The dev server's errors: typed, and EchoMQ errors like the engine's.

They live with the dev server rather than in ``echomq_django.exceptions``: the
launcher and the benchmarks import this package before (or without) Django, and
that module's errors derive from Django's Tasks exceptions.
"""

from __future__ import annotations

from ..engine.errors import EchoMQError


class DevServerError(EchoMQError):
    """Base class of the dev server's errors."""


class ServerBinaryNotFound(DevServerError):
    """No usable valkey-server / redis-server binary on this machine."""


class ServerStartError(DevServerError):
    """The server process did not come up (the message carries its log tail)."""


class ServerCommandError(DevServerError):
    """The server answered a command with an error reply (the message is the reply)."""


class ClusterError(DevServerError):
    """The cluster did not reach ``cluster_state:ok`` in time."""
