"""A TCP proxy that can go silent: connections stay open, bytes stop flowing.

That is what a failover or a network cut can leave behind (a half-open
connection): a blocking read on it would wait for ever without a socket timeout.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class FreezableProxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._frozen: set[socket.socket] = set()
        self._live: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def freeze(self) -> None:
        """Every open connection goes silent (new ones work normally)."""
        with self._lock:
            self._frozen |= self._live

    def close(self) -> None:
        self.listener.close()
        with self._lock:
            for sock in self._live:
                with contextlib.suppress(OSError):
                    sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._live |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if source not in self._frozen:
                    sink.sendall(data)
