"""scripts/run.py end to end: server + web (+ worker/reaper when they exist), Ctrl-C, restart.

The launcher runs as a user would start it (its own session, like a terminal), on
random ports and a temporary var/ directory so that it never meets a developer's
own ``scripts/run``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import redis

from echomq_django.devserver import EmbeddedServer, free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
READY = "Ctrl-C stops everything"


class Launcher:
    def __init__(self, env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "run.py")],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # as a terminal would: Ctrl-C goes to this group
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if READY in line:
                self.ready.set()

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready.is_set():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.terminate()
                pytest.fail("scripts/run did not come up:\n" + self.output())
            time.sleep(0.1)

    def ctrl_c(self, timeout: float = 30) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc.wait(timeout=timeout)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)

    def output(self) -> str:
        return "\n".join(self.lines[-60:])


def launcher_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of a launcher of the test's own: none of the developer's ECHOMQ_
    settings, its var/ and database in ``tmp_path``, then ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHOMQ_")}
    env.pop("PYTEST_CURRENT_TEST", None)
    env.update(
        ECHOMQ_VAR_DIR=str(tmp_path / "var"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        DJANGO_SETTINGS_MODULE="project.settings",
        **settings,
    )
    return env


def _get(url: str) -> int:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if text in cmdline or text.encode() in environ:
            found.append(f"{entry.name}: {cmdline}")
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_run_starts_everything_and_ctrl_c_leaves_nothing_behind(tmp_path):
    server_port, http_port = free_port(), free_port()
    env = launcher_env(
        tmp_path,
        ECHOMQ_SERVER_PORT=str(server_port),
        ECHOMQ_HTTP_ADDR=f"127.0.0.1:{http_port}",
        ECHOMQ_ADMIN_PASSWORD="run-test-password",
    )
    run = Launcher(env)
    try:
        run.wait_ready()
        assert _get(f"http://127.0.0.1:{http_port}/") == 200
        assert _get(f"http://127.0.0.1:{http_port}/admin/login/") == 200
        assert "run-test-password" in run.output()
        client = redis.Redis(host="127.0.0.1", port=server_port)
        client.set("emq:{run}:probe", "kept")
        assert run.ctrl_c() == 0, run.output()
    finally:
        run.terminate()
    assert not _listening(server_port) and not _listening(http_port), run.output()
    assert _processes_mentioning(str(tmp_path)) == [], run.output()

    # The server was shut down cleanly: the same var/valkey/, served again by the
    # mechanism scripts/run uses, has the data back from its AOF.
    with EmbeddedServer(dir=tmp_path / "var" / "valkey", appendonly=True) as again:
        assert redis.Redis.from_url(again.url).get("emq:{run}:probe") == b"kept"


def test_run_refuses_a_taken_web_port_before_starting_anything(tmp_path):
    """A taken ECHOMQ_HTTP_ADDR is reported at once, not after the URLs were printed."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = launcher_env(tmp_path, ECHOMQ_HTTP_ADDR=f"127.0.0.1:{port}")
        done = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "run.py")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0
    assert f"ECHOMQ_HTTP_ADDR=127.0.0.1:{port}: the port is taken" in done.stderr
    assert not (tmp_path / "var" / "valkey").exists()  # no server was started


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_run_on_a_server_of_the_users_never_prints_its_password(tmp_path):
    """With ECHOMQ_URL set, the launcher says which server it uses and how to reach it
    from another terminal: the URL is shown with its password masked."""
    secret = "Url-s3cret-9f2"
    http_port = free_port()
    with EmbeddedServer(password=secret) as server:
        env = launcher_env(
            tmp_path,
            ECHOMQ_URL=f"redis://:{secret}@127.0.0.1:{server.port}/0",
            ECHOMQ_HTTP_ADDR=f"127.0.0.1:{http_port}",
        )
        run = Launcher(env)
        try:
            run.wait_ready()
            assert run.ctrl_c() == 0, run.output()
        finally:
            run.terminate()
    printed = "\n".join(run.lines)
    assert f"127.0.0.1:{server.port}" in printed  # it says which server
    assert secret not in printed, printed
