"""Run the example project: embedded server, migrate, admin user, web, worker, reaper.

Started by ``scripts/run`` (which bootstraps the venv first). Environment:

    ECHOMQ_URL             use this server instead of starting the embedded one
    ECHOMQ_SERVER_PORT     port of the embedded server (default 6390; a free one if taken)
    ECHOMQ_HTTP_ADDR       runserver address (default 127.0.0.1:8000; the next free port if taken)
    ECHOMQ_RUN_QUEUES      queues for runworker (default "default:2 emails:1 slow:1": each
                           queue has slots of its own, so the demo's 8 s task never holds
                           up the others)
    ECHOMQ_RUN_CONCURRENCY its --concurrency (default: none, the sizes' sum)
    ECHOMQ_ADMIN_USER      demo superuser name (default admin)
    ECHOMQ_ADMIN_PASSWORD  its password (default: generated once, kept in var/admin-password)
    ECHOMQ_VAR_DIR         where the server data, the password and the SQLite database
                           live (default var/; DATABASE_URL, if set, wins for the database)

Every child runs in its own process group; Ctrl-C (or SIGTERM) stops them all,
then shuts the server down (SHUTDOWN: its AOF under var/valkey/ keeps the jobs).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from echomq_django.devserver import (  # noqa: E402 - after the path tweak
    EmbeddedServer,
    ServerBinaryNotFound,
    ServerStartError,
    free_port,
    port_is_free,
    spawn,
)
from echomq_django.engine.url import mask_url  # noqa: E402

VAR = Path(os.environ.get("ECHOMQ_VAR_DIR") or ROOT / "var").resolve()
PY = sys.executable
STOP_TIMEOUT = 10.0
# The worker's --grace: running jobs get this long, then it gives them back itself, a
# second before the launcher's own timeout would kill it (and both say the same).
WORKER_GRACE_S = STOP_TIMEOUT - 1
WEB_START_TIMEOUT = 30.0
DEFAULT_HTTP_ADDR = "127.0.0.1:8000"
SETTINGS_DEFAULT_URL = "redis://127.0.0.1:6390/0"  # project/settings.py's ECHOMQ_URL default

_print_lock = threading.RLock()  # re-entrant: say() from a signal handler


def say(text: str) -> None:
    with _print_lock:
        print(f"run | {text}", flush=True)


class Stop(Exception):
    """SIGTERM / SIGINT received."""


def _on_signal(signum: int, frame: object) -> None:
    raise Stop(signal.Signals(signum).name)


def manage(*args: str, env: dict[str, str], capture: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PY, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=capture,
        check=False,
    )


def start_server() -> tuple[EmbeddedServer, TextIO]:
    data = VAR / "valkey"
    data.mkdir(parents=True, exist_ok=True)
    lock = open(data / ".run.lock", "w")  # noqa: SIM115 - held for the whole run
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(
            f"run | another scripts/run already uses {data} (stop it first, or set "
            "ECHOMQ_URL to use a server of your own)"
        ) from None
    wanted = int(os.environ.get("ECHOMQ_SERVER_PORT", "6390"))
    port = wanted if port_is_free(wanted) else free_port()
    if port != wanted:
        say(f"port {wanted} is taken: the embedded server uses port {port} instead")
    server = EmbeddedServer(dir=data, port=port, appendonly=True)
    server.start(timeout=30)  # loading a large AOF may take a while
    say(f"{server.product} {server.version} on {server.url} (pid {server.pid}, data in {data})")
    return server, lock


def http_addr() -> str:
    """The runserver address: ECHOMQ_HTTP_ADDR, else 127.0.0.1:8000 or the next free port.

    Checked before anything starts, so a taken port is reported at once instead of
    runserver failing after the URLs were printed.
    """
    wanted = os.environ.get("ECHOMQ_HTTP_ADDR")
    host, _, port = (wanted or DEFAULT_HTTP_ADDR).rpartition(":")
    host = host or "127.0.0.1"
    if not port.isdigit():
        raise SystemExit(f"run | ECHOMQ_HTTP_ADDR={wanted!r}: expected host:port or port")
    if port_is_free(int(port), host):
        return f"{host}:{port}"
    if wanted:
        raise SystemExit(f"run | ECHOMQ_HTTP_ADDR={wanted}: the port is taken; choose another one")
    free = next((p for p in range(8001, 8100) if port_is_free(p, host)), None) or free_port(host)
    say(f"port {port} is taken: the web server uses port {free} instead")
    return f"{host}:{free}"


def cli_hint(url: str) -> str:
    """The command that reaches this run's server from another terminal."""
    python = Path(PY)
    with contextlib.suppress(ValueError):
        python = python.relative_to(ROOT)
    command = f"{python} manage.py echomq stats --watch"
    if url == SETTINGS_DEFAULT_URL:
        return command
    shown = mask_url(url)
    if shown != url:  # a secret in it: never printed (the user has it already)
        return f"{command}  (with the same ECHOMQ_URL: {shown})"
    return f"ECHOMQ_URL={url} {command}"


# One Django process for both: make sure the demo superuser exists, list the commands.
ENSURE_ADMIN = """
import os
from django.contrib.auth import get_user_model
from django.core.management import get_commands
User = get_user_model()
name, password = os.environ["ECHOMQ_ADMIN_USER"], os.environ["ECHOMQ_ADMIN_PASSWORD"]
user = User.objects.filter(username=name).first()
if user is None:
    User.objects.create_superuser(name, f"{name}@example.com", password)
elif not (user.is_superuser and user.is_staff and user.is_active and user.check_password(password)):
    user.is_superuser = user.is_staff = user.is_active = True
    user.set_password(password)
    user.save()
print("COMMANDS " + " ".join(sorted(get_commands())))
"""


def admin_credentials() -> tuple[str, str]:
    name = os.environ.get("ECHOMQ_ADMIN_USER", "admin")
    password = os.environ.get("ECHOMQ_ADMIN_PASSWORD")
    if not password:
        stored = VAR / "admin-password"
        if stored.exists():
            password = stored.read_text().strip()
        if not password:
            password = secrets.token_urlsafe(12)
            stored.write_text(password + "\n")
            stored.chmod(0o600)
    return name, password


class Child:
    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        # Own process group (Ctrl-C reaches only us; we decide when it stops), and
        # SIGTERM if this launcher dies without cleaning up.
        self.proc = spawn(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with _print_lock:
                sys.stdout.write(f"{self.name:>6} | {line}")
                sys.stdout.flush()

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)


def first_exited(children: list[Child]) -> Child | None:
    return next((child for child in children if child.proc.poll() is not None), None)


def wait_for_web(addr: str, children: list[Child]) -> None:
    """Return once runserver accepts connections (or a child died, or it takes too long).

    The URLs are printed after this, so they come last, below runserver's banner,
    and only when they work.
    """
    host, _, port = addr.rpartition(":")
    deadline = time.monotonic() + WEB_START_TIMEOUT
    while first_exited(children) is None:
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), 0.5):
            return
        if time.monotonic() > deadline:
            say(f"the web server does not answer on {addr} after {WEB_START_TIMEOUT:.0f}s")
            return
        time.sleep(0.2)


def stop_children(children: list[Child]) -> None:
    for child in children:
        child.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for child in children:
        try:
            child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"{child.name} did not stop in {STOP_TIMEOUT:.0f}s: SIGKILL")
    for child in children:
        # The whole group (runserver's autoreloader child included) goes, even if the
        # leader already exited.
        child.signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.proc.wait(timeout=5)
        child.thread.join(timeout=1)


def hurry(children: list[Child]) -> None:
    """A second Ctrl-C while stopping: every child's process group is killed now."""
    say("Ctrl-C again: stopping everything at once")
    for child in children:
        child.signal_group(signal.SIGKILL)


def calm_signals(children: list[Child]) -> None:
    """Cleaning up is not interrupted: a second Ctrl-C kills the children at once, and
    the server is still stopped, so nothing is left behind."""
    signal.signal(signal.SIGINT, lambda signum, frame: hurry(children))
    signal.signal(signal.SIGTERM, lambda signum, frame: hurry(children))


def main() -> int:
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    VAR.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    # The demo superuser's password lives in VAR: so does the database that holds it.
    env.setdefault("DATABASE_URL", f"sqlite:///{VAR / 'db.sqlite3'}")
    env["PYTHONUNBUFFERED"] = "1"

    server: EmbeddedServer | None = None
    lock: TextIO | None = None
    children: list[Child] = []
    status = 0
    try:
        addr = http_addr()
        if env.get("ECHOMQ_URL"):
            say(f"using ECHOMQ_URL={mask_url(env['ECHOMQ_URL'])} (no embedded server started)")
        else:
            try:
                server, lock = start_server()
            except (ServerBinaryNotFound, ServerStartError) as exc:
                say(str(exc))
                return 1
            env["ECHOMQ_URL"] = server.url

        say("manage.py migrate")
        if manage("migrate", "--noinput", env=env).returncode != 0:
            say("migrate failed")
            return 1

        name, password = admin_credentials()
        env_admin = {**env, "ECHOMQ_ADMIN_USER": name, "ECHOMQ_ADMIN_PASSWORD": password}
        out = manage("shell", "--no-imports", "-c", ENSURE_ADMIN, env=env_admin, capture=True)
        if out.returncode != 0:
            say(f"could not create the demo superuser:\n{out.stdout}{out.stderr}")
            return 1
        commands = set(out.stdout.split("COMMANDS ", 1)[-1].split())
        queues = env.get("ECHOMQ_RUN_QUEUES", "default:2 emails:1 slow:1").split()
        concurrency = env.get("ECHOMQ_RUN_CONCURRENCY")
        manage_py = [PY, str(ROOT / "manage.py")]
        children.append(Child("web", [*manage_py, "runserver", addr], env))
        for cmd, args, label in (
            (
                "runworker",
                [
                    *queues,
                    *(["--concurrency", concurrency] if concurrency else []),
                    "--grace",
                    f"{WORKER_GRACE_S:g}",
                ],
                "worker",
            ),
            ("runreaper", [], "reaper"),
        ):
            if cmd in commands:
                children.append(Child(label, [*manage_py, cmd, *args], env))
            else:
                say(f"skipped: manage.py {cmd} (the command does not exist yet)")

        wait_for_web(addr, children)
        if first_exited(children) is None:
            base = f"http://{addr}"
            say("")
            say(f"open  {base}/demo/          enqueue demo tasks, watch one live")
            say(
                f"      {base}/admin/echomq/  the queues; log in as {name!r}, password {password!r}"
            )
            say(f"queue server {mask_url(env['ECHOMQ_URL'])}; from another terminal:")
            say(f"      {cli_hint(env['ECHOMQ_URL'])}")
            say("Ctrl-C stops everything")
            say("")

        while (exited := first_exited(children)) is None:
            time.sleep(0.2)
        say(f"{exited.name} exited with code {exited.proc.returncode}: stopping everything")
        return exited.proc.returncode or 1
    except Stop as exc:
        calm_signals(children)  # before saying so: a second Ctrl-C from now on hurries
        say(
            f"{exc}: stopping. The worker takes no new job and gives running ones up to "
            f"{WORKER_GRACE_S:g}s to finish; Ctrl-C again stops everything at once (running "
            "jobs then go back to pending after their lease)"
        )
        return status
    finally:
        calm_signals(children)
        if children:
            stop_children(children)
            say("web, worker and reaper stopped")
        if server is not None:
            server.stop(timeout=STOP_TIMEOUT, cleanup=False)
            say(f"server stopped (data kept in {server.dir})")
        if lock is not None:
            lock.close()


if __name__ == "__main__":
    sys.exit(main())
