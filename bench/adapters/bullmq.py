"""BullMQ (Node.js), driven through bench/bullmq/bench.js in node subprocesses.

The harness installs ``bench/bullmq/package.json`` with npm into
``bench/node/`` (gitignored) on first use; without node/npm the column is
skipped with a note.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

from bench import common
from bench.adapters.base import Adapter

SRC = common.BENCH_DIR / "bullmq"
NODE_DIR = common.BENCH_DIR / "node"


class BullMQAdapter(Adapter):
    key = "bullmq"
    name = "BullMQ"
    variants = (8, 50, 200)  # worker concurrency; the best is reported
    count_variant = 8
    bulk_api = "Queue.addBulk (one MULTI per batch)"
    notes = (
        "BullMQ: Node.js worker processes (ioredis), concurrency 8, 50 and 200 per process, best "
        "reported; default job options (completed jobs are kept, events stream on). Enqueue "
        "one-by-one awaits each `queue.add` before the next.",
    )

    def __init__(self):
        self._installed = None

    def available(self):
        if not shutil.which("node") or not shutil.which("npm"):
            return "Node.js/npm not found on PATH"
        try:
            self._install()
        except Exception as e:
            return f"npm install failed: {e}"
        return None

    def _install(self):
        if self._installed:
            return
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        pkg = (SRC / "package.json").read_text()
        stamp = NODE_DIR / ".installed-package.json"
        if not (NODE_DIR / "node_modules" / "bullmq").is_dir() or (
            not stamp.exists() or stamp.read_text() != pkg
        ):
            (NODE_DIR / "package.json").write_text(pkg)
            subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=NODE_DIR,
                check=True,
                stdout=subprocess.DEVNULL,
                timeout=600,
            )
            stamp.write_text(pkg)
        shutil.copyfile(SRC / "bench.js", NODE_DIR / "bench.js")
        self._installed = True

    def version(self):
        try:
            v = json.loads((NODE_DIR / "node_modules/bullmq/package.json").read_text())["version"]
            io = json.loads((NODE_DIR / "node_modules/ioredis/package.json").read_text())
            node = subprocess.run(["node", "-v"], capture_output=True, text=True).stdout.strip()
            return f"bullmq {v}, ioredis {io['version']}, node {node}"
        except (OSError, ValueError, KeyError):
            return ""

    def _run(self, *args, timeout=600):
        env = common.worker_env(self.url)
        p = subprocess.run(
            ["node", "bench.js", *map(str, args)],
            cwd=NODE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if p.returncode != 0:
            raise common.WorkerFailed(f"node bench.js {args[0]}: {p.stderr.strip()[-500:]}")
        return json.loads(p.stdout.strip().splitlines()[-1])

    def _worker(self, i, concurrency, tally=None):
        env = common.worker_env(self.url, tally)
        return common.spawn(
            ["node", "bench.js", "worker", str(concurrency)], env, f"bullmq-w{i}", cwd=NODE_DIR
        )

    def spawn_worker(self, i, tally, latency):
        return self._worker(i, 8, tally)

    def enqueue_one(self, n):
        return self._run("enqueue-one", n)["seconds"]

    def enqueue_bulk(self, n, batch):
        return self._run("enqueue-bulk", n, batch)["seconds"]

    def prefill(self, n):
        self._run("prefill", n, 1000)

    def run_workers(self, n, n_procs, variant=None):
        conc = variant or 8
        with common.Tally() as tally:
            procs = [self._worker(i, conc, tally) for i in range(n_procs)]
            try:
                return tally.wait_finished(n, procs, timeout=max(120.0, n / 100.0))
            finally:
                common.stop(procs)

    def pickup_latency(self, k):
        procs = [self._worker(0, 8)]
        try:
            time.sleep(0.2)
            return self._run("latency", k)["latencies_ms"]
        finally:
            common.stop(procs)

    def variant_label(self, variant):
        return f"c={variant}"


ADAPTER = BullMQAdapter()
