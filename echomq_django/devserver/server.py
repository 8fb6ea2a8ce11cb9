"""One real Redis/Valkey server process, owned by this Python process.

It binds loopback only, on a free random port (kept across restarts) or a given
one, and :meth:`EmbeddedServer.start` returns once it answers PING. Commands go
through redis-py with its reply parsing switched off: the caller sees the reply
as the server sent it (``INFO`` as text, ``CLUSTER SLOTS`` as nested lists).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..engine.errors import ServerUnavailable
from . import process
from .binary import find_server_binary, server_product, server_version
from .config import ServerConfig, server_dir, socket_path
from .errors import ServerCommandError, ServerStartError
from .ports import free_port

# No CLIENT SETINFO on the dev server's own connections (tests count the commands a server
# ran, per user): redis-py 8 says so with driver_info=None, older ones with lib_name=None.
try:
    from redis.driver_info import DriverInfo  # noqa: F401 - its presence is the question
except ImportError:
    NO_SETINFO: dict[str, Any] = {"lib_name": None, "lib_version": None}
else:
    NO_SETINFO = {"driver_info": None}


class EmbeddedServer:
    """A server of its own: ``port=None`` picks a free one; ``dir=None`` makes a
    temporary directory, removed by ``stop(cleanup=True)``; its log is ``<dir>/server.log``.
    """

    def __init__(
        self,
        *,
        binary: str | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        dir: str | os.PathLike[str] | None = None,
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
        self._dir, self._owns_dir = server_dir(dir, "echomq-server-")
        self._proc: subprocess.Popen[bytes] | None = None
        self._unix_socket_path = socket_path(self._dir) if unixsocket else None

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

    def log_tail(self, lines: int = 30) -> str:
        chunks = []
        for path in (self._dir / "server.stdout", self.logfile):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").splitlines()
                if text:
                    chunks.append(f"--- {path.name} ---\n" + "\n".join(text[-lines:]))
        return "\n".join(chunks) or "(the server wrote no log)"

    def _client(self, timeout: float) -> redis.Redis:
        client = redis.Redis(
            host=self.host,
            port=self.port,
            password=self.password,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            decode_responses=True,
            encoding_errors="replace",
            protocol=2,
            retry=Retry(NoBackoff(), 0),
            **NO_SETINFO,
        )
        client.response_callbacks.clear()  # the replies as sent
        return client

    def ping(self, timeout: float = 1.0) -> bool:
        """True when the server answers PONG (not LOADING, not an error)."""
        try:
            with self._client(timeout) as client:
                return bool(client.execute_command("PING") == "PONG")
        except (redis.RedisError, OSError):
            return False

    def command(self, *args: object, timeout: float = 5.0) -> Any:
        """Run one command on the server and return its reply as sent.

        ``ServerCommandError`` for an error reply, ``ServerUnavailable`` when the
        server cannot be reached.
        """
        try:
            with self._client(timeout) as client:
                return client.execute_command(*args)
        except redis.ResponseError as exc:
            raise ServerCommandError(str(exc)) from None
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise ServerUnavailable(f"{self.host}:{self._port}: {exc}") from exc

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

    def _config(self) -> ServerConfig:
        return ServerConfig(
            binary=self.binary,
            host=self.host,
            port=self.port,
            dir=self._dir,
            appendonly=self.appendonly,
            password=self.password,
            unix_socket=self._unix_socket_path,
            extra_args=self.extra_args,
        )

    def _spawn_and_wait(self, timeout: float) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        argv = self._config().argv()
        with open(self._dir / "server.stdout", "ab") as out:
            proc = process.spawn(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self._dir,
                close_fds=True,
            )
        self._proc = proc
        process.track(self)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    self._proc = None
                    process.untrack(self)
                    raise ServerStartError(
                        f"{self.binary} exited with code {proc.returncode} while starting on "
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
        process.untrack(self)

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
