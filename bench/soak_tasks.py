"""The chaos soak's task: random work, random failures, and a side log of every execution.

Each execution appends two JSON lines to its process's file
``$SOAK_LOG_DIR/exec-<pid>.jsonl``: ``start`` before the work and ``ok`` or
``fail`` after it. Each line is one ``write(2)`` on an ``O_APPEND`` descriptor,
so a SIGKILL can cut an execution short but never half a line, and a line
written is in the page cache even if the process dies the next instant. A
start without an end is an execution its worker did not survive.

The plan, chosen by the driver at enqueue time, says how the job behaves:
``fast`` (a few ms), ``slow`` (longer than the lease: the heartbeat must keep
it), ``flaky`` (fails with probability ``fail`` on each attempt) and
``poison`` (always fails: it must end dead).
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

from echomq_django.compat import TaskContext, task

_fd: int | None = None
_fd_pid = 0


class SoakFailure(Exception):
    """A failure the soak injects on purpose."""


def side_log(record: dict) -> None:
    """Append one line to this process's side log (one write: whole line or nothing)."""
    global _fd, _fd_pid
    if _fd is None or _fd_pid != os.getpid():
        path = Path(os.environ["SOAK_LOG_DIR"]) / f"exec-{os.getpid()}.jsonl"
        _fd, _fd_pid = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), os.getpid()
    os.write(_fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())


def work_seconds(plan: str, lease_s: float) -> float:
    if plan == "slow":
        return random.uniform(1.2, 2.5) * lease_s
    if random.random() < 0.05:
        return random.uniform(0.02, 0.2)
    return random.uniform(0.0, 0.01)


@task(takes_context=True, queue_name="soak")
def soak_job(context: TaskContext, n: int, plan: str, fail: float = 0.0) -> dict:
    """One unit of soak work; returns the token it ran under (the audit checks the row keeps it)."""
    result = context.task_result
    run = {"job": result.id, "token": context.attempt, "worker": result.worker_ids[-1]}
    side_log({**run, "event": "start", "pid": os.getpid(), "t": time.time()})
    time.sleep(work_seconds(plan, float(os.environ.get("SOAK_LEASE_S", "1.0"))))
    failed = plan == "poison" or (plan == "flaky" and random.random() < fail)
    side_log({**run, "event": "fail" if failed else "ok", "t": time.time()})
    if failed:
        raise SoakFailure(f"job {n} ({plan}) fails on attempt {context.attempt}")
    return {"n": n, "token": context.attempt}
