"""Shared helpers: key names, worker processes, commandstats and MONITOR counting."""

from __future__ import annotations

import contextlib
import math
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
WORK_DIR = BENCH_DIR / ".work"  # gitignored: logs, server dir, venv
LOG_DIR = WORK_DIR / "logs"

# How the no-op tasks report (see bench/tasks/probe.py and bench/bullmq/bench.js):
# a FIFO the harness reads, named by this environment variable. No server round trip,
# so the measured rate is the queue's, not the bookkeeping's.
TALLY_ENV = "BENCH_TALLY"
LAT_KEY = "bench:lat"  # RPUSH by the latency task: ms from enqueue to task start

# Commands the harness itself sends during a counted phase: not the library's.
HARNESS_COMMANDS = {
    "info",
    "config|resetstat",
    "config|get",
    "config|set",
    "monitor",
    "echo",
    "flushall",
    "client|list",
}


def now_ms() -> float:
    return time.time() * 1000.0


def median(xs: list[float | None]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def percentile(xs: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100): the one definition every bench tool uses."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))
    return s[k]


def client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def reset(r: redis.Redis) -> None:
    """Fresh state for a measurement: no keys, zeroed command statistics.

    Valkey 8 frees a flushed keyspace in a background thread, and freeing item 6's
    10^6 rows took CPU from the measurement after it (the 10^4 case read 6-7k
    jobs/s after a 10^6 fill, 20k on a fresh server): wait until it is done. (FLUSHALL
    SYNC would block past redis-py's default 5 s socket timeout.)
    """
    r.execute_command("FLUSHALL", "ASYNC")
    deadline = time.monotonic() + 300
    while int(r.info("memory").get("lazyfree_pending_objects", 0)) and time.monotonic() < deadline:
        time.sleep(0.05)
    r.config_resetstat()


def commandstats(r: redis.Redis) -> dict[str, int]:
    out = {}
    for name, row in r.info("commandstats").items():
        out[name.removeprefix("cmdstat_")] = int(row["calls"])
    return out


def library_calls(stats: dict[str, int]) -> int:
    return sum(v for k, v in stats.items() if k not in HARNESS_COMMANDS)


def server_cpu(r: redis.Redis) -> float:
    """Seconds of CPU the server process has used (user + system, all its threads)."""
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def stats_delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


# -- worker processes ------------------------------------------------------


def worker_env(url: str, tally: Tally | None = None, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    # The harness process runs under bench.djsettings.harness; workers get what they got
    # before it existed (Celery's Django fix-up reads this variable). The Django workers
    # pass their own --settings.
    env["DJANGO_SETTINGS_MODULE"] = "bench.echomq_settings"
    env["BENCH_URL"] = url
    env[TALLY_ENV] = tally.path if tally else ""
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


def spawn(argv: list[str], env: dict, log_name: str, cwd: Path | None = None) -> subprocess.Popen:
    """Start a worker in its own session (so it and its children stop together)."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = open(LOG_DIR / f"{log_name}.log", "ab")  # noqa: SIM115 - closed in stop()
    log.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(argv)}\n".encode())
    log.flush()
    p = subprocess.Popen(
        argv,
        env=env,
        cwd=str(cwd or REPO_ROOT),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    p._bench_log = log  # type: ignore[attr-defined]
    return p


def stop(procs: list[subprocess.Popen], grace: float = 10.0) -> None:
    """SIGTERM each worker's own process group, then SIGKILL what is left."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(max(0.1, deadline - time.monotonic()))
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)  # children (dramatiq forks) too
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(5)
        log = getattr(p, "_bench_log", None)
        if log:
            log.close()


class WorkerFailed(RuntimeError):
    pass


class Tally:
    """The FIFO the no-op tasks report to, and the clock of a processing run.

    A task writes ``d`` when it ends; the first task of each worker process
    writes ``s<its start time>\n`` before its ``d``. Writes of a few bytes to a
    pipe are atomic, so records from many processes and threads never mix. The
    harness reads every 2 ms (the pipe holds 64 KiB, i.e. 64k jobs, between reads):
    the N-th job's end is seen at most ~2 ms late, 0.2% of a one-second run.
    """

    POLL = 0.002

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="bench-tally-")
        self.path = os.path.join(self._dir, "tally")
        os.mkfifo(self.path)
        # Non-blocking, so opening does not wait for a writer; writers' opens then succeed.
        self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self._buf = b""
        self.done = 0
        self.starts: list[tuple[float, int]] = []  # (first task's start, jobs done before it)

    def __enter__(self) -> Tally:
        return self

    def __exit__(self, *exc) -> None:
        os.close(self._fd)
        shutil.rmtree(self._dir, ignore_errors=True)

    def _read(self) -> None:
        with contextlib.suppress(BlockingIOError):
            self._buf += os.read(self._fd, 1 << 16)
        while self._buf:
            i = self._buf.find(b"s")
            if i < 0:
                self.done += len(self._buf)
                self._buf = b""
                return
            j = self._buf.find(b"\n", i)
            self.done += i
            if j < 0:
                self._buf = self._buf[i:]  # a record cut by the read: wait for its end
                return
            self.starts.append((float(self._buf[i + 1 : j]), self.done))
            self._buf = self._buf[j + 1 :]

    def wait_finished(
        self, n: int, procs: list[subprocess.Popen], timeout: float, runners: int | None = None
    ) -> float:
        """Block until the N-th task reports; return the steady-state rate (jobs/s).

        Counted from the first task of the last worker process to start (all are
        running from then on) to the end of the N-th task, over the jobs that were
        not yet done at that start. With one process: first task start -> N-th end.
        ``runners`` is how many processes run tasks when it is not ``len(procs)``
        (a supervisor with N children: one spawned process, N runners).
        """
        runners = runners or len(procs)
        deadline = time.monotonic() + timeout
        while True:
            self._read()
            if self.done >= n:
                t_end = time.time()
                break
            if time.monotonic() > deadline:
                raise WorkerFailed(f"timeout: {self.done}/{n} tasks done after {timeout:.0f}s")
            dead = [p for p in procs if p.poll() is not None and p.returncode not in (0, None)]
            if dead and len(dead) == len(procs):
                raise WorkerFailed(f"all workers exited (rc={[p.returncode for p in dead]})")
            time.sleep(self.POLL)
        if len(self.starts) >= runners:
            t0, before = self.starts[runners - 1]
            return (n - before) / (t_end - t0)
        # Some process never got a job (another claimed them all first, as can
        # happen with a small N): clock from the very first task.
        print(
            f"[bench] note: only {len(self.starts)} of {runners} worker processes ran a "
            "task; clock started at the first task",
            file=sys.stderr,
            flush=True,
        )
        return n / (t_end - min(t for t, _ in self.starts))

    def wait_first(self, procs: list[subprocess.Popen], timeout: float) -> float:
        """Block until the first task has ended; return that moment (``time.time()``)."""
        deadline = time.monotonic() + timeout
        while True:
            self._read()
            if self.done:
                return time.time()
            if time.monotonic() > deadline:
                raise WorkerFailed(f"no task done {timeout:.0f}s after the worker was spawned")
            if all(p.poll() not in (0, None) for p in procs):
                raise WorkerFailed(f"worker exited (rc={[p.returncode for p in procs]})")
            time.sleep(self.POLL)


def pickup_loop(r: redis.Redis, enqueue_latency_job, k: int, warmup: int = 3) -> list[float]:
    """Enqueue one job at a time to an idle worker; collect the task-side latencies.

    The first job also waits for the worker to start (up to 60 s). Between
    jobs the worker sits idle for 50-150 ms (random, so pollers are not
    hit in phase).
    """
    out = []
    for i in range(warmup + k):
        if i:
            time.sleep(random.uniform(0.05, 0.15))
        enqueue_latency_job(now_ms())
        got = r.blpop([LAT_KEY], timeout=60 if i == 0 else 30)
        if not got:
            raise WorkerFailed("latency job not picked up within the timeout")
        if i >= warmup:
            out.append(float(got[1]))
    return out


# -- MONITOR: which commands ran inside scripts -----------------------------


class ScriptCallCounter:
    """Counts commands issued from inside Lua scripts, via MONITOR.

    ``INFO commandstats`` counts every command, including those a script runs
    with ``redis.call``; MONITOR tags the latter ``[db lua]``. Client commands
    = commandstats total - script commands. Only used in the untimed counting
    pass (MONITOR slows the server down).
    """

    def __init__(self, host: str, port: int):
        self.sock = socket.create_connection((host, port))
        self.sock.sendall(b"MONITOR\r\n")
        # Wait for +OK: only then does the server feed this client, so a mark
        # sent after __init__ returns is sure to be seen.
        self.sock.settimeout(10)
        head = b""
        while b"\r\n" not in head:
            chunk = self.sock.recv(64)
            if not chunk:
                raise WorkerFailed("MONITOR connection closed")
            head += chunk
        if not head.startswith(b"+OK"):
            raise WorkerFailed(f"MONITOR refused: {head[:80]!r}")
        self.sock.settimeout(None)
        self._initial = head.split(b"\r\n", 1)[1]
        self.lua = 0
        self.lines = 0
        self.marks: dict[str, int] = {}
        self._cv = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        buf = self._initial
        while not self._stop:
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\r\n")
            for line in lines:
                self.lines += 1
                if b" lua] " in line:
                    self.lua += 1
                elif b'"echo" "bench-mark-' in line or b'"ECHO" "bench-mark-' in line:
                    name = line.rsplit(b"bench-mark-", 1)[1].rstrip(b'"').decode()
                    with self._cv:
                        self.marks[name] = self.lua
                        self._cv.notify_all()

    def mark(self, r: redis.Redis, name: str, timeout: float = 60.0) -> int:
        """Script-command count at the moment the server ran ECHO bench-mark-<name>."""
        r.echo(f"bench-mark-{name}")
        with self._cv:
            if not self._cv.wait_for(lambda: name in self.marks, timeout):
                raise WorkerFailed("MONITOR stream fell behind")
            return self.marks[name]

    def close(self):
        self._stop = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def python_exe() -> str:
    return sys.executable
