"""The enqueue outbox: what it adds to an enqueue, how fast the relay drains it, and
how long a committed job waits for the relay.

    python -m bench.outbox [--db sqlite,postgresql] [--enqueues 2000] [--rows 20000]

Starts its own Valkey (EmbeddedServer) and makes its own databases: a SQLite file
in a temporary directory and, when a server answers on 127.0.0.1:5432 (user
postgres), a PostgreSQL database created for the run and dropped after it. Per
database it prints:

* the transaction of a view, one "order" row + one enqueue + the commit, with
  ``ENQUEUE_ON_COMMIT`` False (the job sent at once) and "outbox" (one more
  INSERT, nothing sent): p50/p99 in ms, and the difference;
* relay throughput: ``--rows`` committed rows drained by one relay (batches of
  500, one bulk enqueue each), jobs/s;
* relay latency: a relay running with its default 0.1 s poll; a job committed at a
  random moment -> its row is on the server (p50/p99);
* with ``--backlog`` rows waiting (default 1,000,000): the relay's batch query and
  the backlog read (what the admin, metrics and ``echomq stats`` pay).

Nothing is asserted: the numbers are for people (see bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import django
from django.conf import settings

from echomq_django.devserver import EmbeddedServer

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def configure(databases: dict[str, dict], url: str) -> None:
    settings.configure(
        SECRET_KEY="bench",
        USE_TZ=True,
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "echomq_django",
            *(["django_tasks"] if django.VERSION < (6, 0) else []),
        ],
        DATABASES=databases,
        ECHOMQ={"URL": url},
        TASKS={
            "default": {
                "BACKEND": "echomq_django.backends.EchoMQBackend",
                "OPTIONS": {"ENQUEUE_ON_COMMIT": "outbox", "TASK_MODULES": ["bench.outbox_tasks"]},
            }
        },
    )
    django.setup()


def transaction_times(mode: bool | str, n: int) -> list[float]:
    """Seconds per view transaction: an order row, one enqueue, the commit."""
    from django.contrib.auth.models import Group
    from django.db import transaction

    from bench.outbox_tasks import noop

    task = dataclasses.replace(noop, enqueue_on_commit=mode)
    times = []
    for i in range(n):
        started = time.perf_counter()
        with transaction.atomic():
            Group.objects.create(name=f"{mode}-{i}-{secrets.token_hex(4)}")
            task.enqueue(i)
        times.append(time.perf_counter() - started)
    return times


def measure(kind: str, args: argparse.Namespace) -> None:
    from django.db import transaction

    from bench.outbox_tasks import noop
    from echomq_django import conf
    from echomq_django.relay import Relay

    jobs = conf.get_jobs()
    jobs.connector.client.flushall()
    relay = Relay(jobs)

    # Enqueue: plain and outbox interleaved in rounds, so load changes hit both alike.
    plain: list[float] = []
    boxed: list[float] = []
    rounds = 10
    for _ in range(rounds):
        plain += transaction_times(False, args.enqueues // rounds)
        boxed += transaction_times("outbox", args.enqueues // rounds)
        relay.drain()
    p50 = (statistics.median(plain) * 1e3, statistics.median(boxed) * 1e3)
    print(
        f"{kind}: order row + enqueue + commit, p50 / p99: plain {p50[0]:.3f} / "
        f"{percentile(plain, 99) * 1e3:.3f} ms, outbox {p50[1]:.3f} / "
        f"{percentile(boxed, 99) * 1e3:.3f} ms; the outbox adds {p50[1] - p50[0]:+.3f} ms (p50)"
    )

    # Relay throughput.
    jobs.connector.client.flushall()
    backend = noop.get_backend()
    with transaction.atomic():
        for start in range(0, args.rows, 1000):
            backend.enqueue_many(noop, [((i,), {}) for i in range(start, start + 1000)])
    started = time.perf_counter()
    moved = relay.drain()
    elapsed = time.perf_counter() - started
    assert moved == args.rows and jobs.stats("default").counts["pending"] == args.rows
    print(f"{kind}: relay drained {moved:,} rows in {elapsed:.2f}s: {moved / elapsed:,.0f} jobs/s")

    # Latency: commit -> on the server, with the relay polling as runreaper runs it.
    jobs.connector.client.flushall()
    running = Relay(jobs)
    thread = running.start()
    waits = []
    for _ in range(args.samples):
        time.sleep(random.uniform(0.0, 0.2))
        with transaction.atomic():
            result = noop.enqueue(0)
        committed = time.perf_counter()
        while jobs.get("default", result.id) is None:
            time.sleep(0.0005)
        waits.append(time.perf_counter() - committed)
    running.stop()
    thread.join()
    print(
        f"{kind}: commit -> on the server (relay polling every {running.interval_s:g}s): "
        f"p50 {statistics.median(waits) * 1e3:.0f} ms, p99 {percentile(waits, 99) * 1e3:.0f} ms"
    )


# Rows that only the relay's query reads (their ids are UUIDv7-shaped, sorting by i).
FILL_SQL = {
    "sqlite": """
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s)
        INSERT INTO echomq_outbox
            (id, queue, backend, payload, options, created_at, available_at, lease, attempts,
             last_error)
        SELECT printf('%%08x-0000-7000-8000-%%012x', i, i), 'default', 'default', '[]', '{}',
               %s, %s, '', 0, '' FROM n""",
    "postgresql": """
        INSERT INTO echomq_outbox
            (id, queue, backend, payload, options, created_at, available_at, lease, attempts,
             last_error)
        SELECT lpad(to_hex(i), 8, '0') || '-0000-7000-8000-' || lpad(to_hex(i), 12, '0'),
               'default', 'default', '[]', '{}', %s, %s, '', 0, '' FROM generate_series(1, %s) i""",
}


def backlog_queries(kind: str, rows: int) -> None:
    """The relay's batch query and the backlog read with ``rows`` rows waiting."""
    from django.db import connection, transaction
    from django.utils import timezone

    from echomq_django import conf, outbox
    from echomq_django.relay import Relay

    now = timezone.now()
    stamp = connection.ops.adapt_datetimefield_value(now)
    params = (rows, stamp, stamp) if kind == "sqlite" else (stamp, stamp, rows)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM echomq_outbox")
        cursor.execute(FILL_SQL[kind], params)
        cursor.execute("ANALYZE echomq_outbox" if kind == "postgresql" else "ANALYZE")
    relay = Relay(conf.get_jobs())
    batch, reads = [], []
    for _ in range(20):
        started = time.perf_counter()
        with transaction.atomic():
            taken = relay.due_rows()
            if relay.locks_rows:
                taken = taken.select_for_update(skip_locked=True)
            assert len(list(taken[: relay.batch])) == relay.batch
        batch.append(time.perf_counter() - started)
        started = time.perf_counter()
        outbox.backlog()
        reads.append(time.perf_counter() - started)
    print(
        f"{kind}: with {rows:,} rows waiting: the relay's batch query (500 rows"
        f"{', FOR UPDATE SKIP LOCKED' if relay.locks_rows else ''}) p50 "
        f"{statistics.median(batch) * 1e3:.1f} ms; the backlog read (bounded COUNT + "
        f"oldest) p50 {statistics.median(reads) * 1e3:.0f} ms"
    )
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM echomq_outbox")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="sqlite,postgresql", help="sqlite, postgresql or both")
    parser.add_argument("--enqueues", type=int, default=2000)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument(
        "--backlog",
        type=int,
        default=1_000_000,
        help="rows left waiting for the query timings (0: skip them)",
    )
    args = parser.parse_args()
    kinds = [k.strip() for k in args.db.split(",") if k.strip()]
    if len(kinds) > 1:  # one process per database: each is that process's "default"
        for kind in kinds:
            subprocess.run([sys.executable, "-m", "bench.outbox", *sys.argv[1:], "--db", kind])
        return
    (kind,) = kinds
    tmp = Path(tempfile.mkdtemp(prefix="echomq-bench-outbox-"))
    admin = pg_name = None
    if kind == "sqlite":
        database = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp / "db.sqlite3")}
    else:
        try:
            import psycopg

            admin = psycopg.connect(PG_ADMIN, autocommit=True)
        except Exception as exc:
            sys.exit(f"postgresql: skipped ({exc})")
        pg_name = f"echomq_bench_outbox_{os.getpid()}"
        admin.execute(f'CREATE DATABASE "{pg_name}"')
        database = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": pg_name,
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": "5432",
        }
    server = EmbeddedServer(dir=tmp / "valkey").start()
    try:
        configure({"default": database}, server.url)
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print(
            f"{kind}: server {server.product} {server.version}; Python "
            f"{sys.version.split()[0]}, Django {django.get_version()}; {os.cpu_count()} CPUs, "
            f"load {os.getloadavg()[0]:.1f}"
        )
        measure(kind, args)
        if args.backlog:
            backlog_queries(kind, args.backlog)
    finally:
        server.stop()
        if admin is not None:
            from django.db import connections

            connections.close_all()
            admin.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
            admin.close()


if __name__ == "__main__":
    main()
