"""Start worker and reaper processes for the tests, and look at them.

Two flavours of the same processes: ``worker``/``reaper`` run the engine alone
(``engine_proc.py``); ``runworker``/``runreaper`` run the management commands
with ``tests.worker.settings``. Each process logs to a file under the test's
tmp_path, shown when a test fails.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_numbers = itertools.count(1)


@dataclass
class Proc:
    kind: str
    popen: subprocess.Popen
    log_path: Path
    stats_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def send(self, sig: int) -> None:
        self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stats(self) -> dict[str, int]:
        return json.loads(self.stats_path.read_text())


def start(kind: str, url: str, *args: str, log_dir: Path, **env: str) -> Proc:
    n = next(_numbers)
    log_path = Path(log_dir) / f"{kind}-{n}.log"
    stats_path = Path(log_dir) / f"{kind}-{n}.stats.json"
    if kind in ("worker", "reaper"):
        argv = [sys.executable, "-m", "tests.support.engine_proc", kind, "--url", url]
        if kind == "worker":
            argv += ["--stats", str(stats_path)]
    elif kind in ("runworker", "runreaper"):
        argv = [sys.executable, "-m", "django", kind]
    else:
        raise ValueError(f"unknown process kind {kind!r}")
    environ = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "tests.worker.settings",
        "ECHOMQ_TEST_URL": url,
        **env,
    }
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(
            [*argv, *args],
            cwd=ROOT,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return Proc(kind, popen, log_path, stats_path)
