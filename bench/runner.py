"""Run every measurement, libraries interleaved, and render the Markdown table.

    python -m bench [--quick] [--libs rq,celery,...] [--reps N] [--output PATH]

Phases run one after another; inside a phase, repetitions are the outer loop
and libraries the inner one (A B C A B C ...), so drift hits all alike. Every
figure is the median over the repetitions; ratios use medians of this run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import redis

from bench import common, report, server, startup
from bench.adapters import ORDER, load
from bench.adapters.base import Adapter


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
    samples: dict[str, dict[str, list]] = field(default_factory=dict)
    errors: dict[tuple[str, str], str] = field(default_factory=dict)  # (phase, label) -> message
    load: list[float] = field(default_factory=list)  # 1-min load average after each measurement

    def add(self, phase: str, label: str, value: Any) -> None:
        self.samples.setdefault(phase, {}).setdefault(label, []).append(value)

    def med(self, phase: str, label: str) -> float | None:
        return common.median(self.samples.get(phase, {}).get(label, []))


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S', time.gmtime())}Z] {msg}", file=sys.stderr, flush=True)


# -- the measurements ------------------------------------------------------------


def m_enqueue_one(a: Adapter, cfg: Config, r: redis.Redis) -> dict:
    common.reset(r)
    t = a.enqueue_one(cfg.n_enqueue)
    return {"rate": cfg.n_enqueue / t}


def m_enqueue_async(a: Adapter, cfg: Config, r: redis.Redis) -> dict | None:
    """``await task.aenqueue()`` one by one from an event loop (Django Tasks backends)."""
    if not hasattr(a, "aenqueue_one"):
        return None
    common.reset(r)
    return {"rate": cfg.n_enqueue / a.aenqueue_one(cfg.n_enqueue)}


def m_enqueue_bulk(a: Adapter, cfg: Config, r: redis.Redis) -> dict | None:
    common.reset(r)
    t = a.enqueue_bulk(cfg.n_enqueue, cfg.batch)
    return None if t is None else {"rate": cfg.n_enqueue / t}


def _timed_run(r: redis.Redis, n: int, run: Callable[[], float]) -> dict:
    """Rate of ``run()`` and the server's own CPU per job over it (µs, INFO cpu)."""
    cpu = common.server_cpu(r)
    rate = run()
    return {"rate": rate, "srv_us": (common.server_cpu(r) - cpu) / n * 1e6}


def _process(n_procs: int) -> Callable:
    def m(a: Adapter, cfg: Config, r: redis.Redis, variant: Any) -> dict:
        common.reset(r)
        a.prefill(cfg.n_process)
        r.config_resetstat()
        return _timed_run(r, cfg.n_process, lambda: a.run_workers(cfg.n_process, n_procs, variant))

    return m


def m_supervised(a: Adapter, cfg: Config, r: redis.Redis, variant: Any) -> dict | None:
    """One worker command with 2 task processes under its supervisor (``--processes 2``),
    each child with the variant's concurrency."""
    if not getattr(a, "supervisor_argv", None):
        return None
    common.reset(r)
    a.prefill(cfg.n_process)
    return _timed_run(r, cfg.n_process, lambda: a.run_supervised(cfg.n_process, 2, variant))


def m_spawn(a: Adapter, cfg: Config, r: redis.Redis) -> dict:
    """First job done after spawn: median of ``spawn_runs`` spawns (one job waiting)."""
    runs = []
    for _ in range(cfg.spawn_runs):
        common.reset(r)
        runs.append(a.first_job_seconds())
    out: dict[str, Any] = {"s": common.median(runs)}
    if a.key == "echomq":  # where its start-up goes (bench/startup.py)
        common.reset(r)
        a.prefill(1)
        argv = a.worker_argv(0, latency=False)
        for stage, secs in startup.one_run(a.url, argv).items():
            out[f"stage_{stage}"] = secs
        for module, ms in startup.heaviest_imports(argv, common.worker_env(a.url)):
            out[f"{startup.IMPORT_PREFIX}{module}"] = ms
    return out


def m_count(a: Adapter, cfg: Config, r: redis.Redis) -> dict:
    """Untimed: commandstats deltas + MONITOR for the share run inside scripts."""
    n = cfg.n_count
    common.reset(r)
    mon = common.ScriptCallCounter(
        r.connection_pool.connection_kwargs["host"], r.connection_pool.connection_kwargs["port"]
    )
    try:
        lua0 = mon.mark(r, "start")
        a.enqueue_one(n)
        s1 = common.commandstats(r)
        lua1 = mon.mark(r, "enqueued")
        a.run_workers(n, 1, a.count_variant)
        s2 = common.commandstats(r)
        lua2 = mon.mark(r, "processed")
    finally:
        mon.close()
    enq_total = common.library_calls(s1)
    proc_total = common.library_calls(s2) - enq_total
    enq_lua, proc_lua = lua1 - lua0, lua2 - lua1
    delta = common.stats_delta(s2, s1)
    return {
        "enq_server": enq_total / n,
        "enq_client": (enq_total - enq_lua) / n,
        "proc_server": proc_total / n,
        "proc_client": (proc_total - proc_lua) / n,
        "enq_by_cmd": {k: v / n for k, v in s1.items() if k not in common.HARNESS_COMMANDS},
        "proc_by_cmd": {
            k: v / n for k, v in delta.items() if k not in common.HARNESS_COMMANDS and v
        },
    }


def m_latency(a: Adapter, cfg: Config, r: redis.Redis) -> dict:
    common.reset(r)
    lat = a.pickup_latency(cfg.k_latency)
    return {"p50": common.percentile(lat, 50), "p99": common.percentile(lat, 99)}


def m_scale(a: Adapter, cfg: Config, r: redis.Redis) -> dict | None:
    """Item 6, for adapters that have the optional methods (EchoMQ)."""
    if not hasattr(a, "claim_complete_rate"):
        return None
    out: dict[str, float] = {}
    common.reset(r)
    out["small"] = a.claim_complete_rate(cfg.scale_small, cfg.scale_n)
    common.reset(r)
    out["large"] = a.claim_complete_rate(cfg.scale_large, cfg.scale_n)
    if hasattr(a, "admin_page_seconds"):
        common.reset(r)
        out["admin_ms"] = a.admin_page_seconds(cfg.admin_size) * 1000.0
    return out


def raw_limits(url: str, cfg: Config) -> dict[str, float]:
    """Item 5: redis-py against the same server, trivial script."""
    r = common.client(url)
    common.reset(r)
    sha = r.script_load("return 1")
    r.evalsha(sha, 0)
    n = cfg.n_raw_seq
    t = time.perf_counter()
    for _ in range(n):
        r.evalsha(sha, 0)
    seq = n / (time.perf_counter() - t)
    n, b = cfg.n_raw_pipe, cfg.raw_pipe_batch
    p = r.pipeline(transaction=False)
    t = time.perf_counter()
    for _ in range(n // b):
        for _ in range(b):
            p.evalsha(sha, 0)
        p.execute()
    pipe = (n // b * b) / (time.perf_counter() - t)
    r.close()
    return {"seq": seq, "pipe": pipe}


# -- orchestration ---------------------------------------------------------------


PHASES = (
    "raw", "enq1", "enqa", "enqbulk", "proc1", "proc2", "procsup", "spawn", "count", "lat", "scale",
)  # fmt: skip


def run(
    cfg: Config, adapters: list[Adapter], url: str, res: Results, only: Sequence[str] = PHASES
) -> report.Labels:
    r = common.client(url)
    labels: report.Labels = {}  # adapter key -> list of (label, variant)
    for a in adapters:
        labels[a.key] = [(a.key if v is None else f"{a.key}:{v}", v) for v in a.variants]

    def each_lib(phase: str, fn: Callable | None, with_variants: bool = False) -> None:
        for rep in range(cfg.reps):
            if phase == "raw":
                try:
                    out = raw_limits(url, cfg)
                    for k, v in out.items():
                        res.add(f"raw_{k}", "redis-py", v)
                except Exception as e:
                    res.errors[("raw", "redis-py")] = repr(e)
                continue
            for a in adapters:
                targets = labels[a.key] if with_variants else [(a.key, None)]
                for label, variant in targets:
                    t = time.monotonic()
                    try:
                        out = fn(a, cfg, r, variant) if with_variants else fn(a, cfg, r)
                    except Exception as e:
                        msg = f"rep {rep + 1}: {type(e).__name__}: {e}"
                        prev = res.errors.get((phase, label))
                        res.errors[(phase, label)] = f"{prev}; {msg}" if prev else msg
                        log(f"{phase} {label} rep {rep + 1}: FAILED {e}")
                        traceback.print_exc(file=sys.stderr)
                        continue
                    if out is None:
                        continue  # not applicable to this library
                    res.load.append(os.getloadavg()[0])
                    for k, v in out.items():
                        res.add(f"{phase}_{k}", label, v)
                    brief = ", ".join(
                        f"{k}={v:,.2f}" for k, v in out.items() if isinstance(v, float)
                    )
                    log(f"{phase} {label} rep {rep + 1}: {brief} ({time.monotonic() - t:.1f}s)")

    phases = [
        ("raw", None, False),
        ("enq1", m_enqueue_one, False),
        ("enqa", m_enqueue_async, False),
        ("enqbulk", m_enqueue_bulk, False),
        ("proc1", _process(1), True),
        ("proc2", _process(2), True),
        ("procsup", m_supervised, True),
        ("spawn", m_spawn, False),
        ("count", m_count, False),
        ("lat", m_latency, False),
        ("scale", m_scale, False),
    ]
    for phase, fn, wv in phases:
        if phase not in only:
            continue
        log(f"phase {phase}")
        each_lib(phase, fn, wv)
    common.reset(r)
    r.close()
    return labels


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small N, a minute or so")
    ap.add_argument("--libs", default=",".join(ORDER), help="comma list, default: all")
    ap.add_argument("--reps", type=int, help="repetitions (default 3)")
    ap.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma list of measurements to run, default: all ({', '.join(PHASES)})",
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
    if set(only) - set(PHASES):
        ap.error(f"unknown phases {sorted(set(only) - set(PHASES))}; known: {', '.join(PHASES)}")

    t_start = time.monotonic()
    srv = server.start()
    url = srv.url
    log(f"server {server.describe(url)} at {url}")
    os.environ["BENCH_URL"] = url
    adapters, skipped = [], {}
    try:
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
        res = Results()
        labels = run(cfg, adapters, url, res, only)
        versions = {a.key: a.version() for a in adapters}
        meta = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "duration": f"{(time.monotonic() - t_start) / 60:.1f} min",
            "machine": machine(),
            "load": report.load_note(res.load),
            "server": server.describe(url),
            "client": f"Python {platform.python_version()}, "
            + ", ".join(f"{d} {metadata.version(d)}" for d in ("redis", "hiredis") if _has_dist(d)),
            "versions": versions,
            "command": " ".join(["bash bench/run.sh", *(sys.argv[1:] if argv is None else argv)]),
        }
        text = report.render(cfg, adapters, skipped, labels, res, meta)
        for a in adapters:
            try:
                a.teardown()
                a.harness.close()
            except Exception:
                pass
    finally:
        srv.stop()
    print(text)
    if args.output != "-":
        kept = report.foreign_sections(args.output)
        with open(args.output, "w") as f:
            f.write(text + ("\n" + kept if kept else ""))
        log(f"wrote {args.output}" + (" (kept the sections other tools wrote)" if kept else ""))
    common.WORK_DIR.mkdir(parents=True, exist_ok=True)
    with open(common.WORK_DIR / "results.json", "w") as f:
        json.dump(
            {
                "samples": res.samples,
                "errors": {f"{p}|{lab}": e for (p, lab), e in res.errors.items()},
            },
            f,
            indent=1,
        )
    return 0


def _has_dist(name: str) -> bool:
    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False
