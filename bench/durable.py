"""What DURABLE_ENQUEUE costs: enqueue latency with WAIT / WAITAOF against a real replica.

    python -m bench.durable [--enqueues 20] [--appendfsync everysec|always]

Starts a primary and one replica of it (both EmbeddedServer, AOF on, loopback)
and times ``--enqueues`` single enqueues for each setting. Nothing is asserted:
the numbers are for people (docs/settings.md quotes them).
"""

from __future__ import annotations

import argparse
import time

from echomq_django.devserver import EmbeddedServer
from echomq_django.engine.connector import Connector
from echomq_django.engine.durable import Durability, DurableJobs
from echomq_django.engine.jobs import Jobs, NewJob

SETTINGS = {
    "none": None,
    '{"REPLICAS": 1}': Durability(replicas=1, timeout_s=5),
    '{"LOCAL": True}': Durability(local=True, timeout_s=5),
    '{"REPLICAS": 1, "LOCAL": True}': Durability(replicas=1, local=True, timeout_s=5),
}


def settled(replica: EmbeddedServer) -> bool:
    replication = replica.command("INFO", "replication")
    persistence = replica.command("INFO", "persistence")
    return "master_link_status:up" in replication and all(
        f"{field}:0" in persistence
        for field in ("aof_rewrite_in_progress", "aof_rewrite_scheduled")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--enqueues", type=int, default=20)
    parser.add_argument("--appendfsync", choices=("everysec", "always"), default="everysec")
    options = parser.parse_args()
    args = ["--repl-diskless-sync-delay", "0", "--appendfsync", options.appendfsync]
    primary = EmbeddedServer(appendonly=True, extra_args=args).start()
    replica = EmbeddedServer(
        appendonly=True, extra_args=[*args, "--replicaof", primary.host, str(primary.port)]
    ).start()
    try:
        while not settled(replica):
            time.sleep(0.05)
        connector = Connector.from_url(primary.url)
        print(f"{primary.product} {primary.version}, appendfsync {options.appendfsync}")
        for name, durability in SETTINGS.items():
            jobs = Jobs(connector) if durability is None else DurableJobs(connector, durability)
            jobs.enqueue("bench", NewJob(payload="{}"))  # scripts loaded, connection made
            started = time.perf_counter()
            for _ in range(options.enqueues):
                jobs.enqueue("bench", NewJob(payload="{}"))
            per_job = (time.perf_counter() - started) / options.enqueues * 1000
            print(f"  DURABLE_ENQUEUE {name:34} {per_job:8.2f} ms per enqueue")
    finally:
        replica.kill()
        primary.kill()
        replica.stop()
        primary.stop()


if __name__ == "__main__":
    main()
