"""The harness: run every measurement, libraries interleaved, and write the report.

    python -m bench [--quick] [--libs rq,celery,...] [--reps N] [--output PATH]

Phases run one after another; inside a phase, repetitions are the outer loop
and libraries the inner one (A B C A B C ...), so drift hits all alike. Every
figure is the median over the repetitions; ratios use medians of this run.
The measurements are bench/measures.py, the tables bench/report.py.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import redis

from bench import common, report, server
from bench.adapters import ORDER, load
from bench.adapters.base import Adapter
from bench.figures import Labels, Skipped
from bench.measures import PHASE_NAMES, PHASES, Phase, raw_limits


@dataclass
class Config:
    reps: int = 3
    n_enqueue: int = 10_000  # item 1
    batch: int = 1_000  # bulk API batch size
    n_process: int = 10_000  # item 2
    n_count: int = 2_000  # item 3 (MONITOR pass)
    k_latency: int = 50  # item 4, samples per repetition
    n_raw_seq: int = 20_000  # item 5
    n_raw_pipe: int = 200_000
    raw_pipe_batch: int = 100
    scale_small: int = 10**4  # item 6 (adapters that implement it)
    scale_large: int = 10**6
    scale_n: int = 10_000
    admin_size: int = 10**6
    spawn_runs: int = 5  # first job after spawn: runs per repetition (median)
    mode: str = "full"


QUICK = Config(
    reps=1,
    n_enqueue=1_000,
    n_process=1_000,
    n_count=500,
    k_latency=15,
    n_raw_seq=5_000,
    n_raw_pipe=50_000,
    scale_small=10**3,
    scale_large=10**5,
    scale_n=1_000,
    admin_size=10**5,
    spawn_runs=3,
    mode="quick",
)


@dataclass
class Results:
    # samples[phase][lib_label] -> list of values (one per repetition)
    samples: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    errors: dict[tuple[str, str], str] = field(default_factory=dict)  # (phase, label) -> message
    load: list[float] = field(default_factory=list)  # 1-min load average after each measurement

    def add(self, phase: str, label: str, value: Any) -> None:
        self.samples.setdefault(phase, {}).setdefault(label, []).append(value)

    def med(self, phase: str, label: str) -> float | None:
        return common.median(self.samples.get(phase, {}).get(label, []))


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S', time.gmtime())}Z] {msg}", file=sys.stderr, flush=True)


def run(
    cfg: Config, adapters: list[Adapter], url: str, res: Results, only: Sequence[str] = PHASE_NAMES
) -> Labels:
    """Every phase in ``only``: repetitions outer, libraries (and their variants) inner."""
    r = common.client(url)
    labels: Labels = {
        a.key: [(a.key if v is None else f"{a.key}:{v}", v) for v in a.variants] for a in adapters
    }
    for phase in PHASES:
        if phase.name not in only:
            continue
        log(f"phase {phase.name}")
        for rep in range(cfg.reps):
            if phase.measure is None:
                measure_raw(cfg, url, res)
                continue
            for a in adapters:
                for label, variant in labels[a.key] if phase.per_variant else [(a.key, None)]:
                    measure_one(phase, a, label, variant, rep, cfg, r, res)
    common.reset(r)
    r.close()
    return labels


def measure_raw(cfg: Config, url: str, res: Results) -> None:
    try:
        for k, v in raw_limits(url, cfg).items():
            res.add(f"raw_{k}", "redis-py", v)
    except Exception as e:
        res.errors[("raw", "redis-py")] = repr(e)


def measure_one(phase: Phase, a: Adapter, label: str, variant: Any, rep: int, cfg: Config,
                r: redis.Redis, res: Results) -> None:  # fmt: skip
    """One repetition of one phase on one library (variant): its figures, or its failure
    (kept for the report's footnote; the other repetitions and libraries go on)."""
    assert phase.measure is not None
    t = time.monotonic()
    try:
        out = phase.measure(a, cfg, r, variant) if phase.per_variant else phase.measure(a, cfg, r)
    except Exception as e:
        msg = f"rep {rep + 1}: {type(e).__name__}: {e}"
        prev = res.errors.get((phase.name, label))
        res.errors[(phase.name, label)] = f"{prev}; {msg}" if prev else msg
        log(f"{phase.name} {label} rep {rep + 1}: FAILED {e}")
        traceback.print_exc(file=sys.stderr)
        return
    if out is None:
        return  # not applicable to this library
    res.load.append(os.getloadavg()[0])
    for k, v in out.items():
        res.add(f"{phase.name}_{k}", label, v)
    brief = ", ".join(f"{k}={v:,.2f}" for k, v in out.items() if isinstance(v, float))
    log(f"{phase.name} {label} rep {rep + 1}: {brief} ({time.monotonic() - t:.1f}s)")


def _first_line(path: str, prefix: str) -> str:
    try:
        with open(path) as f:
            return next((line for line in f if line.startswith(prefix)), "")
    except OSError:
        return ""


def machine() -> str:
    cpu = _first_line("/proc/cpuinfo", "model name").partition(":")[2].strip()
    mem = _first_line("/proc/meminfo", "MemTotal").split()
    ram = f"{int(mem[1]) / 1024 / 1024:.0f} GiB RAM" if len(mem) > 1 else ""
    return f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} CPUs, {ram}"


def _has_dist(name: str) -> bool:
    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, Config, list[str], list[str]]:
    """The options, the run's Config, the libraries and the phases asked for (checked)."""
    ap = argparse.ArgumentParser(prog="python -m bench", description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small N, a minute or so")
    ap.add_argument("--libs", default=",".join(ORDER), help="comma list, default: all")
    ap.add_argument("--reps", type=int, help="repetitions (default 3)")
    ap.add_argument(
        "--phases",
        default=",".join(PHASE_NAMES),
        help=f"comma list of measurements to run, default: all ({', '.join(PHASE_NAMES)})",
    )
    ap.add_argument(
        "--output",
        default=str(common.BENCH_DIR / "RESULTS.md"),
        help="Markdown file to write (default bench/RESULTS.md); '-' for stdout only",
    )
    args = ap.parse_args(argv)
    cfg = QUICK if args.quick else Config()
    if args.reps:
        cfg.reps = max(1, args.reps)
    wanted = [k.strip() for k in args.libs.split(",") if k.strip()]
    unknown = [k for k in wanted if k not in ORDER]
    if unknown:
        ap.error(f"unknown libraries {unknown}; known: {', '.join(ORDER)}")
    only = [p.strip() for p in args.phases.split(",") if p.strip()]
    if set(only) - set(PHASE_NAMES):
        ap.error(
            f"unknown phases {sorted(set(only) - set(PHASE_NAMES))}; known: {', '.join(PHASE_NAMES)}"
        )
    return args, cfg, wanted, only


def set_up(wanted: list[str], url: str) -> tuple[list[Adapter], Skipped]:
    """The adapters that could start against ``url``; the others with why they could not."""
    adapters: list[Adapter] = []
    skipped: Skipped = {}
    for k in wanted:
        a = load(k)
        why = a.available()
        if why:
            skipped[k] = (a.name, why)
            log(f"skip {a.name}: {why}")
            continue
        try:
            a.setup(url)
        except Exception as e:
            skipped[k] = (a.name, f"setup failed: {type(e).__name__}: {e}")
            log(f"skip {a.name}: setup failed: {e}")
            traceback.print_exc(file=sys.stderr)
            continue
        adapters.append(a)
    return adapters, skipped


def tear_down(adapters: list[Adapter]) -> None:
    for a in adapters:
        try:
            a.teardown()
            a.harness.close()
        except Exception:
            pass


def run_meta(adapters: list[Adapter], url: str, res: Results, t_start: float,
             argv: list[str] | None) -> dict[str, Any]:  # fmt: skip
    """What the report's header says about the run: when, where, on what, how."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "duration": f"{(time.monotonic() - t_start) / 60:.1f} min",
        "machine": machine(),
        "load": report.load_note(res.load),
        "server": server.describe(url),
        "client": f"Python {platform.python_version()}, "
        + ", ".join(f"{d} {metadata.version(d)}" for d in ("redis", "hiredis") if _has_dist(d)),
        "versions": {a.key: a.version() for a in adapters},
        "command": " ".join(["bash bench/run.sh", *(sys.argv[1:] if argv is None else argv)]),
    }


def write_outputs(text: str, output: str, res: Results) -> None:
    """The report to stdout and ``output`` (keeping sections other tools wrote), the raw
    samples to bench/.work/results.json."""
    print(text)
    if output != "-":
        kept = report.foreign_sections(output)
        with open(output, "w") as f:
            f.write(text + ("\n" + kept if kept else ""))
        log(f"wrote {output}" + (" (kept the sections other tools wrote)" if kept else ""))
    common.WORK_DIR.mkdir(parents=True, exist_ok=True)
    with open(common.WORK_DIR / "results.json", "w") as f:
        samples = {"samples": res.samples,
                   "errors": {f"{p}|{lab}": e for (p, lab), e in res.errors.items()}}  # fmt: skip
        json.dump(samples, f, indent=1)


def compile_working_tree() -> None:
    """Write the bytecode of the working tree's packages, as a pip install writes an
    installed package's (the peers'). Where PYTHONDONTWRITEBYTECODE is set and none
    was written, every spawned EchoMQ worker would compile echomq_django from source:
    about a second of its "first job done after spawn" here, which no user pays."""
    for package in ("echomq_django", "bench"):
        compileall.compile_dir(common.REPO_ROOT / package, quiet=1)


def main(argv: list[str] | None = None) -> int:
    args, cfg, wanted, only = parse_args(argv)
    t_start = time.monotonic()
    compile_working_tree()
    srv = server.start()
    url = srv.url
    log(f"server {server.describe(url)} at {url}")
    os.environ["BENCH_URL"] = url
    try:
        adapters, skipped = set_up(wanted, url)
        res = Results()
        labels = run(cfg, adapters, url, res, only)
        meta = run_meta(adapters, url, res, t_start, argv)
        text = report.render(cfg, adapters, skipped, labels, res, meta)
        tear_down(adapters)
    finally:
        srv.stop()
    write_outputs(text, args.output, res)
    return 0
