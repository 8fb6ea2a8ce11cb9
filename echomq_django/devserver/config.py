"""Where a dev server keeps its files, and the configuration it is started with.

Data, log, stdout and socket live in one directory per server: a fresh
temporary one unless a directory is given (the launcher keeps ``var/valkey``).
Persistence is off unless asked for; AOF, when asked, fsyncs every second so
that data survives a restart. A password goes into a 0600 config file, never
on the command line where ``ps`` shows it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .binary import takes_debug_command_flag

SUN_PATH_MAX = 100  # a unix socket path must fit in sun_path (108 bytes)


def server_dir(given: str | os.PathLike[str] | None, prefix: str) -> tuple[Path, bool]:
    """(the directory, whether we made it and so remove it on cleanup)."""
    if given is None:
        return Path(tempfile.mkdtemp(prefix=prefix)), True
    path = Path(given).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path, False


def socket_path(directory: Path) -> Path:
    """``<dir>/server.sock``, or one in a short temporary directory when that is too long."""
    path = directory / "server.sock"
    if len(str(path)) > SUN_PATH_MAX:
        path = Path(tempfile.mkdtemp(prefix="emq-sock-")) / "server.sock"
    return path


def conf_quote(value: str) -> str:
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


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """What one start of a server is given; ``argv`` is its command line."""

    binary: str
    host: str
    port: int
    dir: Path
    appendonly: bool
    password: str | None
    unix_socket: Path | None
    extra_args: Sequence[str]

    @property
    def logfile(self) -> Path:
        return self.dir / "server.log"

    def argv(self) -> list[str]:
        argv = [self.binary]
        if self.password is not None:
            conf = self.dir / "server.conf"
            conf.touch(mode=0o600)
            conf.chmod(0o600)
            conf.write_text(f"requirepass {conf_quote(self.password)}\n")
            argv.append(str(conf))
        argv += [
            "--port", str(self.port),
            "--bind", self.host,
            "--dir", str(self.dir),
            "--logfile", str(self.logfile),
            "--daemonize", "no",
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
        ]  # fmt: skip
        if self.appendonly:
            argv += ["--appendfsync", "everysec"]
        if self.unix_socket is not None:
            argv += ["--unixsocket", str(self.unix_socket), "--unixsocketperm", "700"]
        if takes_debug_command_flag(self.binary):
            argv += ["--enable-debug-command", "local"]
        argv += [str(a) for a in self.extra_args]
        return argv
