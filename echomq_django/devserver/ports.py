"""Free loopback ports: for servers started side by side, and for the launcher's web server."""

from __future__ import annotations

import random
import socket
import threading

from .errors import ServerStartError

_lock = threading.Lock()
_handed_out: set[int] = set()


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on (host, port).

    A bind test with SO_REUSEADDR, as the server binds: connections of a stopped
    server still in TIME_WAIT do not make its port look taken.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1", *, cluster_bus: bool = False) -> int:
    """A free TCP port not handed out before by this process (and a free
    ``port + 10000`` cluster bus port when asked).

    Ports are drawn from 20000-45000 so that the cluster bus port stays valid.
    """
    with _lock:
        for _ in range(500):
            port = random.randint(20000, 45000)
            if port in _handed_out:
                continue
            if not port_is_free(port, host):
                continue
            if cluster_bus and not port_is_free(port + 10000, host):
                continue
            _handed_out.add(port)
            return port
    raise ServerStartError("could not find a free TCP port on loopback")
