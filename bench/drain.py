"""Drain prefilled no-op jobs with ``runworker`` from one or more checkouts, interleaved:
the A/B of a change to the worker's hot path.

``python -m bench.drain [--jobs 40000] [--concurrency 1] [--processes 0] [--rounds 3] TREE...``

Each TREE is a checkout of this repository (the working tree by default); its own
code enqueues the jobs (its Django backend, ``enqueue_many``) and runs them (its
``runworker --burst``), against one fresh embedded Valkey. Rounds are the outer loop
and trees the inner one (A B A B ...), so a machine that slows down or speeds up
shifts both alike. Printed per run: jobs/s (from the first task's start to the last
task's end, as the harness's end-to-end rate), and per job the worker's CPU (its
process from /proc, over the same window; with --processes, the supervisor's only)
and the server's (``INFO cpu``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench import common, server

FILL = """
import django; django.setup()
from bench.tasks import echomq_tasks
backend = echomq_tasks.noop.get_backend()
for i in range(0, {n}, 1000):
    backend.enqueue_many(echomq_tasks.noop, [((), {{}})] * min(1000, {n} - i))
"""


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process (Linux /proc); None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drain(url: str, tree: Path, n: int, concurrency: int, processes: int) -> dict[str, float]:
    r = common.client(url)
    common.reset(r)
    fifo = Path(tempfile.mkdtemp()) / "tally"
    os.mkfifo(fifo)
    env = {**os.environ, "BENCH_URL": url, "BENCH_TALLY": str(fifo), "PYTHONPATH": str(tree),
           "DJANGO_SETTINGS_MODULE": "bench.echomq_settings"}  # fmt: skip
    subprocess.run([common.python_exe(), "-c", FILL.format(n=n)], env=env, cwd=tree, check=True)
    argv = [common.python_exe(), "-m", "django", "runworker", "bench", "--burst", "-v", "0",
            "--concurrency", str(concurrency), "--processes", str(processes)]  # fmt: skip
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    cpu_before = common.server_cpu(r)
    worker = subprocess.Popen(argv, env=env, cwd=tree, stderr=subprocess.DEVNULL)
    done, first, cpu_first, cpu_last = 0, 0.0, None, None
    try:
        while done < n:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                chunk = b""
            done += chunk.count(b"d")
            if not first and b"s" in chunk:
                first, cpu_first = time.time(), process_cpu_s(worker.pid)
            cpu_last = process_cpu_s(worker.pid) if done < n else cpu_last
            if not chunk:
                if worker.poll() is not None:
                    raise RuntimeError(f"the worker exited after {done} of {n} jobs")
                time.sleep(0.002)
        end = time.time()
        server_cpu = common.server_cpu(r) - cpu_before
        worker.wait(60)
    finally:
        os.close(fd)
        if worker.poll() is None:
            worker.kill()
    worker_cpu = (cpu_last or 0.0) - (cpu_first or 0.0)
    return {"rate": n / (end - first), "worker_us": 1e6 * worker_cpu / n,
            "server_us": 1e6 * server_cpu / n}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", type=Path, default=[common.REPO_ROOT])
    parser.add_argument("--jobs", type=int, default=40_000)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--processes", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    srv = server.start()
    try:
        for round_ in range(1, args.rounds + 1):
            for tree in args.trees:
                got = drain(srv.url, tree.resolve(), args.jobs, args.concurrency, args.processes)
                print(f"round {round_} {tree}: {got['rate']:,.0f} jobs/s, worker "
                      f"{got['worker_us']:.1f} us/job, server {got['server_us']:.1f} us/job",
                      flush=True)  # fmt: skip
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
