"""The measurements: one function per phase, each on one library, on a fresh server.

A measurement returns its figures (``{"rate": ...}``) or ``None`` where it does not
apply to the library; the harness (bench/runner.py) runs them interleaved and
keeps every repetition's figures for the medians.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from bench import common, startup

if TYPE_CHECKING:
    from bench.adapters.base import Adapter
    from bench.runner import Config

Figures = dict[str, Any]  # metric -> value (a float, or a dict of per-command figures)


def m_enqueue_one(a: Adapter, cfg: Config, r: redis.Redis) -> Figures:
    common.reset(r)
    t = a.enqueue_one(cfg.n_enqueue)
    return {"rate": cfg.n_enqueue / t}


def m_enqueue_async(a: Adapter, cfg: Config, r: redis.Redis) -> Figures | None:
    """``await task.aenqueue()`` one by one from an event loop (Django Tasks backends)."""
    if not hasattr(a, "aenqueue_one"):
        return None
    common.reset(r)
    return {"rate": cfg.n_enqueue / a.aenqueue_one(cfg.n_enqueue)}


def m_enqueue_bulk(a: Adapter, cfg: Config, r: redis.Redis) -> Figures | None:
    common.reset(r)
    t = a.enqueue_bulk(cfg.n_enqueue, cfg.batch)
    return None if t is None else {"rate": cfg.n_enqueue / t}


def _timed_run(r: redis.Redis, n: int, run: Callable[[], float]) -> Figures:
    """Rate of ``run()`` and the server's own CPU per job over it (µs, INFO cpu)."""
    cpu = common.server_cpu(r)
    rate = run()
    return {"rate": rate, "srv_us": (common.server_cpu(r) - cpu) / n * 1e6}


def _process(n_procs: int) -> Callable[..., Figures]:
    def m(a: Adapter, cfg: Config, r: redis.Redis, variant: Any) -> Figures:
        common.reset(r)
        a.prefill(cfg.n_process)
        r.config_resetstat()
        return _timed_run(r, cfg.n_process, lambda: a.run_workers(cfg.n_process, n_procs, variant))

    return m


def m_supervised(a: Adapter, cfg: Config, r: redis.Redis, variant: Any) -> Figures | None:
    """One worker command with 2 task processes under its supervisor (``--processes 2``),
    each child with the variant's concurrency."""
    if not getattr(a, "supervisor_argv", None):
        return None
    common.reset(r)
    a.prefill(cfg.n_process)
    return _timed_run(r, cfg.n_process, lambda: a.run_supervised(cfg.n_process, 2, variant))


def m_spawn(a: Adapter, cfg: Config, r: redis.Redis) -> Figures:
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


def m_count(a: Adapter, cfg: Config, r: redis.Redis) -> Figures:
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


def m_latency(a: Adapter, cfg: Config, r: redis.Redis) -> Figures:
    common.reset(r)
    lat = a.pickup_latency(cfg.k_latency)
    return {"p50": common.percentile(lat, 50), "p99": common.percentile(lat, 99)}


def m_scale(a: Adapter, cfg: Config, r: redis.Redis) -> Figures | None:
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


@dataclass(frozen=True)
class Phase:
    """One phase of a run: its measurement, and whether it runs once per worker variant
    (concurrency, threads) or once per library. ``raw`` measures no library (``None``)."""

    name: str
    measure: Callable[..., Figures | None] | None
    per_variant: bool = False


PHASES = (
    Phase("raw", None),
    Phase("enq1", m_enqueue_one),
    Phase("enqa", m_enqueue_async),
    Phase("enqbulk", m_enqueue_bulk),
    Phase("proc1", _process(1), per_variant=True),
    Phase("proc2", _process(2), per_variant=True),
    Phase("procsup", m_supervised, per_variant=True),
    Phase("spawn", m_spawn),
    Phase("count", m_count),
    Phase("lat", m_latency),
    Phase("scale", m_scale),
)
PHASE_NAMES = tuple(p.name for p in PHASES)
