"""A worker or reaper process on the engine alone (no Django), for the process tests.

    python -m tests.support.engine_proc worker --url URL [--stats FILE] [options] QUEUE ...
    python -m tests.support.engine_proc reaper --url URL [--interval S] QUEUE ...

Nothing of Django is imported: the engine's Worker and Reaper are built here directly,
so a process test sees the engine's behaviour, not the management commands'.

The worker's handler reads the payload as ``{"sleep": seconds, "fail": bool, "crash":
code, "gil": seconds, "log": path, "run": seconds, "fork": seconds, "pids": path, "term":
true}``: it exits its process at once with ``crash``, holds the GIL in one C call for
``gil`` seconds, writes a side log (start, a tick every 20 ms for ``run`` seconds,
end) to ``log``, forks a process that sleeps ``fork`` seconds (its pid written to
``pids``) and waits for it, SIGTERMs a process and a fork it starts (``term``),
sleeps, then fails or returns the pid that ran it. SIGTERM/SIGINT stop it gracefully (``runworker``'s
helper, which also exits at once on a second signal, lives in the Django layer, and the
engine has none). On exit the worker writes its WorkerStats as JSON to ``--stats``.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from types import FrameType

from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Claimed, Jobs
from echomq_django.engine.reaper import Reaper
from echomq_django.engine.retry_policy import RetryPolicy
from echomq_django.engine.worker import Outcome, Success, Supervisor, Worker
from echomq_django.logs import TEXT_FORMAT

logger = logging.getLogger("echomq.test-proc")


def _run_logged(spec: dict, claimed: Claimed) -> None:
    def line(event: str) -> None:
        with open(spec["log"], "a") as f:
            f.write(json.dumps({"job": claimed.id, "pid": os.getpid(), "event": event,
                                "t": time.time()}) + "\n")  # fmt: skip

    line("start")
    end = time.monotonic() + float(spec.get("run", 0))
    while time.monotonic() < end:
        time.sleep(0.02)
        line("tick")
    line("end")


def handler(claimed: Claimed) -> Outcome:
    spec = json.loads(claimed.job.payload) if claimed.job else {}
    if spec.get("crash"):  # a task that kills its own process (OOM kill, segfault, _exit)
        os._exit(int(spec["crash"]))
    if spec.get("gil"):  # one C call holding the GIL (PyDLL does not release it)
        ctypes.PyDLL(None).usleep(int(float(spec["gil"]) * 1_000_000))
    if spec.get("log"):  # a side log of the run: start, a tick every 20 ms, end
        _run_logged(spec, claimed)
    if spec.get("fork"):  # a task that forks: its fork sleeps, the task waits for it
        return Success(json.dumps({"waited": fork_and_wait(float(spec["fork"]), spec["pids"])}))
    if spec.get("term"):  # a task that stops the processes it started with SIGTERM
        return Success(json.dumps({"terminated": terminate_children()}))
    time.sleep(float(spec.get("sleep", 0)))
    if spec.get("fail"):
        raise RuntimeError("asked to fail")
    return Success(json.dumps({"pid": os.getpid()}))


def fork_and_wait(seconds: float, pids: str) -> int:
    """Fork a process that sleeps ``seconds`` (it inherits every descriptor of this one),
    write its pid to ``pids``, and wait for it."""
    pid = os.fork()
    if pid == 0:
        time.sleep(seconds)
        os._exit(0)
    with open(pids, "a") as f:
        f.write(f"{pid}\n")
    return os.waitpid(pid, 0)[1]


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0]


def terminate_children() -> list[object]:
    """Start ``sleep`` and a fork, SIGTERM both: how each ended (-15: by the SIGTERM)."""
    ended: list[object] = []
    sleep = subprocess.Popen(["sleep", "30"])
    sleep.terminate()
    try:
        ended.append(sleep.wait(3))
    except subprocess.TimeoutExpired:
        sleep.kill()
        sleep.wait()
        ended.append("ignored")
    ready, up = os.pipe()
    pid = os.fork()
    if pid == 0:  # up once Python is (a signal before that is lost, with any fork)
        os.write(up, b".")
        time.sleep(30)
        os._exit(0)
    os.read(ready, 1)
    os.close(ready)
    os.close(up)
    # Asleep: a fork made by a thread other than the main one sees a signal that comes
    # while it runs Python code only at its next interrupted call (CPython).
    deadline = time.monotonic() + 3
    while _state(pid) != "S" and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 3
    while (status := os.waitpid(pid, os.WNOHANG)[1]) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    if status == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        ended.append("ignored")
    else:
        ended.append(-os.WTERMSIG(status) if os.WIFSIGNALED(status) else status)
    return ended


def setup(url: str) -> tuple[Jobs, Callable[[Claimed], Outcome]]:
    """A supervised child's jobs and handler (``Supervisor(setup=...)``)."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=TEXT_FORMAT)
    return Jobs(Connector.from_url(url)), handler


def broken_setup() -> tuple[Jobs, Callable[[Claimed], Outcome]]:
    """A supervised child's setup that always fails (an import error, a bad setting)."""
    raise RuntimeError("this setup is broken")


def stop_on_signals(stop: Callable[[], None]) -> None:
    """SIGTERM / SIGINT: stop gracefully (the held jobs finish or go back)."""

    def handle(signum: int, frame: FrameType | None) -> None:
        logger.warning("%s: stopping gracefully", signal.Signals(signum).name)
        stop()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["worker", "reaper"])
    parser.add_argument("queues", nargs="+")
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--lease-ms", type=int, default=1000)
    parser.add_argument("--name")
    parser.add_argument("--grace", type=float, default=30.0)
    parser.add_argument("--burst", action="store_true")
    parser.add_argument("--stats")
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--processes", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=0.0)
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=TEXT_FORMAT)
    jobs = Jobs(Connector.from_url(args.url))
    if args.kind == "reaper":
        reaper = Reaper(jobs, args.queues, discover=False, interval_s=args.interval)
        stop_on_signals(reaper.stop)
        reaper.run()
        return 0
    options = dict(
        concurrency=args.concurrency,
        lease_ms=args.lease_ms,
        name=args.name,
        burst=args.burst,
        grace_s=args.grace,
        retry_policy=RetryPolicy(base_ms=0),
        time_limit_s=args.time_limit,
    )
    worker: Worker | Supervisor
    if args.processes:
        worker = Supervisor(
            jobs, args.queues, processes=args.processes, setup="tests.support.engine_proc:setup",
            setup_args={"url": args.url}, **options,
        )  # fmt: skip
    else:
        # run as __main__: the solo child imports the handler by name
        worker = Worker(
            jobs, args.queues, handler, child_handler="tests.support.engine_proc:handler", **options
        )
    stop_on_signals(worker.stop)
    stats = worker.run()
    if args.stats:
        with open(args.stats, "w") as f:
            json.dump(dataclasses.asdict(stats), f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
