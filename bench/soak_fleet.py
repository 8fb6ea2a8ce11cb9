"""The chaos soak's processes: its workers and reapers, and every fault done to them."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "soak"


@dataclass
class Options:
    jobs: int
    workers: int
    threads: int
    processes: int
    reapers: int
    minutes: float
    lease: float
    kill_every: float
    term_every: float
    cut_every: float
    pause_every: float
    restart: bool
    flaky: float
    fail: float
    slow: float
    poison: float
    crash_budget: int
    seed: int
    out: Path
    binary: str | None
    json_path: Path | None


@dataclass
class Fleet:
    """The worker and reaper processes, and every fault done to them."""

    opts: Options
    env: dict[str, str]
    workers: dict[int, tuple[str, subprocess.Popen]] = field(default_factory=dict)
    retiring: dict[str, subprocess.Popen] = field(default_factory=dict)  # SIGTERMed, finishing
    reapers: list[subprocess.Popen] = field(default_factory=list)
    generation: int = 0
    killed: set[str] = field(default_factory=set)
    termed: set[str] = field(default_factory=set)
    paused: set[str] = field(default_factory=set)
    events: list[tuple[float, str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen:
        log = open(self.opts.out / log_name, "ab")  # noqa: SIM115 - the child owns it
        return subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def start_worker(self, slot: int) -> None:
        self.generation += 1
        name = f"soak-{slot}-{self.generation}"
        proc = self._spawn(
            ["runworker", QUEUE, "--concurrency", str(self.opts.threads),
             "--processes", str(self.opts.processes),
             "--lease", str(self.opts.lease), "--name", name, "--grace", "5",
             "--crash-budget", str(self.opts.crash_budget), "-v", "0"],
            f"{name}.log",
        )  # fmt: skip
        self.workers[slot] = (name, proc)

    def start(self) -> None:
        for slot in range(self.opts.workers):
            self.start_worker(slot)
        for i in range(self.opts.reapers):
            self.reapers.append(
                self._spawn(
                    [
                        "runreaper",
                        QUEUE,
                        "--interval",
                        "0.25",
                        "--crash-budget",
                        str(self.opts.crash_budget),
                        "-v",
                        "0",
                    ],
                    f"reaper-{i}.log",
                )
            )

    def note(self, kind: str, target: str) -> None:
        with self.lock:
            self.events.append((time.time(), kind, target))

    def kill_one(self, rng: random.Random) -> None:
        """SIGKILL a random worker (no release, no goodbye) and start a fresh one."""
        slot = rng.randrange(self.opts.workers)
        name, proc = self.workers[slot]
        os.kill(proc.pid, signal.SIGCONT)  # a paused worker is killed as well
        proc.kill()
        proc.wait()
        self.killed.add(name)
        self.note("SIGKILL", name)
        self.start_worker(slot)

    def term_one(self, rng: random.Random) -> None:
        """SIGTERM a random worker (graceful: running jobs finish, the rest are released).

        Its replacement starts at once; the old process exits on its own.
        """
        slot = rng.randrange(self.opts.workers)
        name, proc = self.workers[slot]
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        self.retiring[name] = proc
        self.termed.add(name)
        self.note("SIGTERM", name)
        self.start_worker(slot)

    def pause_one(self, rng: random.Random) -> None:
        """SIGSTOP a random worker for twice the lease: a zombie that wakes up late."""
        name, proc = self.workers[rng.randrange(self.opts.workers)]
        if name in self.paused or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGSTOP)
        self.paused.add(name)
        self.note("SIGSTOP", name)

        def wake() -> None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                self.note("SIGCONT", name)

        threading.Timer(2 * self.opts.lease, wake).start()

    def write_events(self, path: Path) -> None:
        with path.open("w") as f:
            for moment, kind, target in self.events:
                f.write(json.dumps({"t": moment, "fault": kind, "target": target}) + "\n")

    def stop(self) -> None:
        """SIGTERM everything (graceful), wait, and SIGKILL what does not exit.

        Workers SIGTERMed during the run are only waited for: a second signal would
        make them exit at once.
        """
        running = [p for _, p in self.workers.values()] + self.reapers
        for proc in running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in running + list(self.retiring.values()):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
