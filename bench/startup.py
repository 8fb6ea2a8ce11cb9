"""Where EchoMQ's runworker spends the time from spawn to its first job done.

One job waiting, one ``runworker`` spawned through :mod:`bench.startup_probe`
(the real command, timestamps around it); each stage is the time since the
previous mark, medians over the runs. ``python -X importtime`` of the same
command gives the heaviest imports (cumulative, top level).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

from bench import common

IMPORT_PREFIX = "imp:"  # result keys of heaviest_imports(): imp:<module> -> ms

STAGES = (
    ("interpreter", "Python start-up (interpreter, site)"),
    ("django_import", "import django, django.core.management"),
    ("django_setup", "django.setup(): settings, INSTALLED_APPS (echomq_django and its imports)"),
    ("checks_start", "management command loaded and parsed"),
    ("checks_end", "system checks"),
    ("claim_call", "worker start-up to its first claim"),
    ("claim_return", "first claim (round trip)"),
    ("done", "first job run and reported"),
)


def probe_argv(argv: list[str]) -> list[str]:
    """``[python, -m, django, ARGS...]`` → the same under bench.startup_probe."""
    python, _, _, *rest = argv
    return [python, "-m", "bench.startup_probe", *rest]


def one_run(url: str, worker_argv: list[str]) -> dict[str, float]:
    """Seconds per stage of one spawn (the job must already be waiting)."""
    fd, marks = tempfile.mkstemp(prefix="bench-startup-")
    os.close(fd)
    try:
        with common.Tally() as tally:
            env = common.worker_env(url, tally, {"BENCH_STARTUP": marks})
            started = time.time()
            procs = [common.spawn(probe_argv(worker_argv), env, "echomq-startup")]
            try:
                done = tally.wait_first(procs, timeout=60.0)
            finally:
                common.stop(procs)
        with open(marks) as f:
            at = dict(line.split() for line in f if line.strip())
    finally:
        os.unlink(marks)
    times = {k: float(v) for k, v in at.items()}
    times["done"] = done
    out, prev = {}, started
    for stage, _ in STAGES:
        if stage in times:
            out[stage] = times[stage] - prev
            prev = times[stage]
    out["total"] = done - started
    return out


def heaviest_imports(worker_argv: list[str], env: dict, top: int = 8) -> list[tuple[str, float]]:
    """Top-level imports by cumulative time (ms) under ``-X importtime`` of the same
    command with ``--help``: settings, apps and the command module, no worker run."""
    python, *rest = worker_argv
    cmd = [python, "-X", "importtime", *rest, "--help"]  # imports everything, runs nothing
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    rows = []
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cum_us, name = line.removeprefix("import time:").split("|")
        top_level = name.startswith(" ") and not name.startswith("  ")  # nested: indented
        if cum_us.strip().isdigit() and top_level:
            rows.append((name.strip(), int(cum_us) / 1000.0))
    return sorted(rows, key=lambda r: -r[1])[:top]
