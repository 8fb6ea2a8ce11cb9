"""The chaos soak: real workers, real reapers, real faults, and an audit that must balance.

::

    python bench/soak.py --jobs 100000 --workers 4 --threads 4 --reapers 2 --minutes 10

What it does:

1. Starts its own server with AOF (``EmbeddedServer(appendonly=True)``).
2. Starts ``--workers`` ``manage.py runworker`` processes (``--threads`` jobs at once
   each) and ``--reapers`` ``manage.py runreaper`` processes on the soak settings
   (``bench/soak_settings.py``) and task (``bench/soak_tasks.py``).
3. Enqueues ``--jobs`` jobs through the Django backend's own payload encoding, in
   pipelined batches, while the workers already run. Each job gets a plan: fast,
   slow (outlives its lease: the heartbeat must keep it), flaky (random failures,
   retried), poison (always fails: must end dead).
4. Chaos, for most of the run: SIGKILL a random worker every ``--kill-every``
   seconds and start a fresh one; SIGTERM one every ``--term-every`` seconds
   (graceful: it finishes running jobs, releases the rest) and start a fresh one;
   SIGSTOP a random worker for twice the lease
   every ``--pause-every`` seconds (its leases expire, other workers take its
   jobs, and when it wakes its completes must be refused); restart the server
   once in the middle (SHUTDOWN, AOF reload); every ``--cut-every`` seconds, cut
   every connection of the workers and reapers or lose the reply of their next
   script call (they talk through the fault proxy of ``tests/support/proxy.py``).
5. Lets the queue drain without chaos, stops everything, and audits the
   server's own data against the tasks' side logs (``bench/soak_audit.py``).

Exit status 0 only if every audit check passes. ``--json`` writes the audit.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ and echomq_django/ importable
    sys.path.insert(0, str(ROOT))

from bench.soak_audit import Audit, audit  # noqa: E402
from bench.soak_fleet import QUEUE, Fleet, Options  # noqa: E402
from echomq_django.devserver import EmbeddedServer, find_server_binary  # noqa: E402
from echomq_django.engine.errors import ServerUnavailable  # noqa: E402
from tests.support.proxy import Fault, FaultProxy  # noqa: E402

BATCH = 500


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--workers", type=int, default=4, help="runworker processes")
    p.add_argument("--threads", type=int, default=4, help="--concurrency of each worker")
    p.add_argument(
        "--processes", type=int, default=0, help="--processes of each worker (0: threads only)"
    )
    p.add_argument("--reapers", type=int, default=2, help="runreaper processes")
    p.add_argument("--minutes", type=float, default=10.0, help="time budget of the whole run")
    p.add_argument("--lease", type=float, default=1.0, help="job lease in seconds")
    p.add_argument("--kill-every", type=float, default=3.0, help="seconds between SIGKILLs")
    p.add_argument("--term-every", type=float, default=10.0, help="seconds between SIGTERMs")
    p.add_argument(
        "--cut-every",
        type=float,
        default=5.0,
        help="seconds between network faults (workers and reapers talk through a fault "
        "proxy that closes every connection, or loses the next reply); 0: no proxy",
    )
    p.add_argument("--pause-every", type=float, default=8.0, help="seconds between SIGSTOPs")
    p.add_argument("--no-restart", dest="restart", action="store_false")
    p.add_argument("--flaky", type=float, default=0.10, help="share of flaky jobs")
    p.add_argument("--fail", type=float, default=0.3, help="failure chance per flaky attempt")
    p.add_argument("--slow", type=float, default=0.01, help="share of jobs outliving the lease")
    p.add_argument("--poison", type=float, default=0.002, help="share of always-failing jobs")
    p.add_argument(
        "--crash-budget", type=int, default=10,
        help="crashes that send a job to dead (workers and reapers; the product's default "
        "is 3). A job whose worker the soak kills or stops while it runs alone is charged a "
        "crash, as the server cannot tell a kill from a crash it caused: over minutes of "
        "kills every few seconds a healthy job could be hit 3 times; 10 times it is not",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--out", type=Path, default=None, help="directory for logs (default: temp)")
    p.add_argument("--binary", default=None, help="server binary (default: embedded Valkey)")
    p.add_argument("--json", dest="json_path", type=Path, default=None, help="write the audit")
    a = p.parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="echomq-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    seed = a.seed if a.seed is not None else random.randrange(2**32)
    return Options(**{**vars(a), "out": out, "seed": seed})


def plan_of(rng: random.Random, opts: Options) -> str:
    r = rng.random()
    for plan, share in (("poison", opts.poison), ("slow", opts.slow), ("flaky", opts.flaky)):
        if r < share:
            return plan
        r -= share
    return "fast"


def enqueue_all(opts: Options, rng: random.Random, plans: dict[str, str], progress: list[int]):
    """Enqueue every job in pipelined batches; ride out the server restart.

    Payloads come from the real backend (``new_job``), so workers decode exactly
    what an application's ``enqueue`` writes. Imported here: after ``django.setup()``.
    """
    from bench.soak_tasks import soak_job
    from echomq_django import conf
    from echomq_django.compat import task_backends

    backend = task_backends["default"]
    jobs = conf.get_jobs()
    for start in range(0, opts.jobs, BATCH):
        batch = []
        for n in range(start, min(start + BATCH, opts.jobs)):
            plan = plan_of(rng, opts)
            job = backend.new_job(soak_job, [n, plan], {"fail": opts.fail})
            plans[job.id] = plan
            batch.append(job)
        while batch:
            try:
                jobs.enqueue_many(QUEUE, batch)
                batch = []
            except ServerUnavailable:
                time.sleep(0.2)  # a lost reply: keep only the jobs the server does not hold
                batch = missing(jobs, batch)
        progress[0] = min(start + BATCH, opts.jobs)


def missing(jobs, batch):
    """The jobs of ``batch`` the server does not hold (a cut pipeline stores a prefix)."""
    while True:
        try:
            return [job for job in batch if jobs.get(QUEUE, job.id) is None]
        except ServerUnavailable:
            time.sleep(0.2)


def network_fault(proxy: FaultProxy, fleet: Fleet, rng: random.Random) -> None:
    """Cut every connection at once, or lose the reply of the next script call."""
    if rng.random() < 0.5:
        fleet.note("network cut", f"{proxy.cut_all()} connections")
    else:
        proxy.arm(Fault.DROP_REPLY)
        fleet.note("lost reply", "next EVALSHA")


@dataclass
class Chaos:
    """The fault schedule: each kind of fault fires at random intervals around its period."""

    opts: Options
    fleet: Fleet
    server: EmbeddedServer
    proxy: FaultProxy | None
    rng: random.Random
    due: dict[str, float] = field(default_factory=dict)
    restarted: bool = False

    def __post_init__(self) -> None:
        self.restarted = not self.opts.restart
        self.due = dict(self.periods())

    def periods(self) -> dict[str, float]:
        o = self.opts
        periods = {"kill": o.kill_every, "term": o.term_every, "pause": o.pause_every}
        if self.proxy:
            periods["net"] = o.cut_every
        return periods

    def tick(self, now: float, done: int, restart_at: float) -> None:
        """Fire every fault that is due; restart the server once, half-way."""
        actions = {
            "kill": lambda: self.fleet.kill_one(self.rng),
            "term": lambda: self.fleet.term_one(self.rng),
            "pause": lambda: self.fleet.pause_one(self.rng),
            "net": lambda: network_fault(self.proxy, self.fleet, self.rng),
        }
        for kind, period in self.periods().items():
            if now >= self.due[kind]:
                actions[kind]()
                self.due[kind] = now + self.rng.uniform(0.5, 1.5) * period
        if not self.restarted and (done >= self.opts.jobs // 2 or now >= restart_at):
            self.fleet.note("server restart", f"{self.server.product} pid {self.server.pid}")
            self.server.restart(timeout=60)
            self.restarted = True


def finished_count(client) -> int:
    try:
        return client.zcard(f"emq:{{{QUEUE}}}:completed") + client.zcard(f"emq:{{{QUEUE}}}:dead")
    except Exception:
        return -1  # the server is restarting


def worker_env(opts: Options, url: str, logs: Path) -> dict[str, str]:
    """The environment of the worker and reaper processes (``bench/soak_settings.py``)."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.soak_settings",
        "SOAK_URL": url,
        "SOAK_LEASE_S": str(opts.lease),
        "SOAK_LOG_DIR": str(logs),
        "PYTHONPATH": str(ROOT),
    }


def run(opts: Options) -> Audit:
    import django
    import redis

    rng = random.Random(opts.seed)
    server = EmbeddedServer(
        binary=opts.binary or find_server_binary(), appendonly=True, dir=opts.out / "server"
    ).start()
    logs = opts.out / "side"
    logs.mkdir(exist_ok=True)
    proxy = FaultProxy(server.host, server.port).start() if opts.cut_every > 0 else None
    env = worker_env(opts, proxy.url if proxy else server.url, logs)
    # The driver (enqueue, progress, audit) talks to the server directly.
    os.environ.update(DJANGO_SETTINGS_MODULE="bench.soak_settings", SOAK_URL=server.url)
    django.setup()
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    fleet = Fleet(opts, env)
    chaos = Chaos(opts, fleet, server, proxy, rng)
    plans: dict[str, str] = {}
    progress = [0]
    budget = opts.minutes * 60
    chaos_until = budget * 0.7
    print(f"soak: seed {opts.seed}, server {server.product} {server.version}, logs {opts.out}")
    t0 = time.monotonic()
    try:
        fleet.start()
        feeder = threading.Thread(
            target=enqueue_all, args=(opts, random.Random(opts.seed + 1), plans, progress)
        )
        feeder.start()
        last_report = 0.0
        while True:
            time.sleep(0.1)
            now = time.monotonic() - t0
            done = finished_count(client)
            if done >= opts.jobs and not feeder.is_alive():
                break
            if now > budget:
                print("soak: time budget exhausted before the queue drained")
                break
            if now < chaos_until:
                chaos.tick(now, done, restart_at=chaos_until / 2)
            if now - last_report >= 5:
                last_report = now
                print(f"soak: {now:6.1f}s enqueued {progress[0]:>7} finished {done:>7}", flush=True)
        feeder.join()
        elapsed = time.monotonic() - t0
    finally:
        fleet.stop()
        if proxy:
            proxy.close()
    fleet.write_events(opts.out / "faults.jsonl")
    result = audit(client, plans, logs, fleet, opts.out, elapsed)
    server.stop(cleanup=False)
    return result


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    result = run(opts)
    print(result.table())
    if opts.json_path:
        opts.json_path.write_text(json.dumps(result.as_dict(), indent=2))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
