"""The suite's one TCP proxy: it cuts, stalls or silences connections, for fault tests.

The proxy sits between a client and a real server on loopback. Normally it
forwards bytes both ways. A test arms ONE fault, which fires on the first
client-to-server chunk that contains ``match`` (by default ``EVALSHA``, so the
connection handshake and script loads pass untouched), or on a later one
(``after``: that many such chunks pass first):

* ``DROP_REQUEST``  the request is swallowed and both sides are closed: the
  server never saw it (state must be *before*).
* ``HALF_REQUEST``  half the request's bytes reach the server, then both sides
  are closed: the server holds an incomplete command and discards it (*before*).
* ``DROP_REPLY``    the request reaches the server, its reply is swallowed and
  both sides are closed: the transition ran (*after*) but the client cannot know.
* ``STALL``         the request is held until the client gives up (its socket
  timeout) and then dropped (*before*).
* ``LATE``          the request is held until the client gives up, then
  delivered anyway: the transition runs after the client reported a failure
  (*after*, later).

``arm`` returns an event set once the fault has run its course (for ``LATE``:
once the late request was delivered and answered).

``cut_all()`` closes every live connection at once (a server restart or a
network blip as the client sees it). ``freeze()`` makes every live connection go
silent instead: it stays open, bytes stop flowing both ways (the half-open
connection a failover or a network cut can leave behind, on which a blocking read
without a socket timeout would wait for ever); new connections work normally.
Threads only: no event loop to share with the code under test.
"""

from __future__ import annotations

import contextlib
import enum
import socket
import threading
import time
from dataclasses import dataclass, field


class Fault(enum.Enum):
    DROP_REQUEST = "drop_request"
    HALF_REQUEST = "half_request"
    DROP_REPLY = "drop_reply"
    STALL = "stall"
    LATE = "late"


#: Faults after which the server ran the command; the others leave it unseen.
DELIVERED = frozenset({Fault.DROP_REPLY, Fault.LATE})


@dataclass
class _Armed:
    fault: Fault
    match: bytes
    after: int = 0  # matching requests still to let through before it fires
    fired: threading.Event = field(default_factory=threading.Event)


class _Link:
    """One proxied connection: a client socket, a server socket, two pump threads."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.swallow_reply = False
        self.frozen = False  # freeze(): bytes are read and dropped, the sockets stay open
        self.closed = threading.Event()
        self.threads = [
            threading.Thread(target=self._upstream, daemon=True),
            threading.Thread(target=self._downstream, daemon=True),
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _upstream(self) -> None:
        """Client to server: where faults fire."""
        try:
            while chunk := self.client.recv(65536):
                if self.frozen:
                    continue
                armed = self.proxy._take(chunk)
                if armed is None:
                    self.server.sendall(chunk)
                    continue
                self._fire(armed.fault, chunk)
                armed.fired.set()
                if self.closed.is_set():
                    return
        except OSError:
            pass
        self.close()

    def _fire(self, fault: Fault, chunk: bytes) -> None:
        if fault is Fault.DROP_REQUEST:
            self.close()
        elif fault is Fault.HALF_REQUEST:
            self.server.sendall(chunk[: max(1, len(chunk) // 2)])
            time.sleep(0.05)  # let the server read the fragment before the close
            self.close()
        elif fault is Fault.DROP_REPLY:
            self.swallow_reply = True
            self.server.sendall(chunk)
        elif fault is Fault.STALL:
            self._wait_client_gone()
            self.close()
        elif fault is Fault.LATE:
            self._wait_client_gone()
            self.swallow_reply = True
            self.server.sendall(chunk)
            self.closed.wait(5)  # the reply nobody reads arrived: the command has run

    def _wait_client_gone(self) -> None:
        """Block until the client closes its end (its socket timeout fired)."""
        with contextlib.suppress(OSError):
            while self.client.recv(65536):
                pass

    def _downstream(self) -> None:
        """Server to client; swallows the first reply after DROP_REPLY and hangs up."""
        try:
            while chunk := self.server.recv(65536):
                if self.swallow_reply:
                    break
                if not self.frozen:
                    self.client.sendall(chunk)
        except OSError:
            pass
        self.close()


class FaultProxy:
    """``FaultProxy(host, port).start()``; point the client at ``proxy.url``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._lock = threading.Lock()
        self._armed: _Armed | None = None
        self._links: list[_Link] = []
        self._running = False
        self.connections = 0  # accepted so far: a reconnect shows up here

    @property
    def port(self) -> int:
        return self._listener.getsockname()[1]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> FaultProxy:
        self._listener.listen(64)
        self._running = True
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        while self._running:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()  # the server is down: the client sees a reset
                continue
            link = _Link(self, client, server)
            with self._lock:
                self._links = [lk for lk in self._links if not lk.closed.is_set()]
                self._links.append(link)
                self.connections += 1
            link.start()

    def arm(self, fault: Fault, match: bytes = b"EVALSHA", *, after: int = 0) -> threading.Event:
        """Fire ``fault`` on the next request containing ``match`` (after ``after`` such
        requests went through); returns its fired event."""
        armed = _Armed(fault, match.upper(), after)
        with self._lock:
            self._armed = armed
        return armed.fired

    def disarm(self) -> None:
        with self._lock:
            self._armed = None

    def _take(self, chunk: bytes) -> _Armed | None:
        with self._lock:
            armed = self._armed
            if armed is None or armed.match not in chunk.upper():
                return None
            if armed.after:
                armed.after -= 1
                return None
            self._armed = None
            return armed

    def freeze(self) -> int:
        """Every live connection goes silent (new ones work normally); returns how many."""
        with self._lock:
            live = [lk for lk in self._links if not lk.closed.is_set()]
            for link in live:
                link.frozen = True
        return len(live)

    def cut_all(self) -> int:
        """Close every live connection now; returns how many were cut."""
        with self._lock:
            links, self._links = self._links, []
        live = [lk for lk in links if not lk.closed.is_set()]
        for link in live:
            link.close()
        return len(live)

    def close(self) -> None:
        self._running = False
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut_all()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
