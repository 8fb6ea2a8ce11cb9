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
from dataclasses import dataclass, field
from importlib import metadata

from bench import common, server
from bench.adapters import ORDER, load


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
    mode="quick",
)


@dataclass
class Results:
    # samples[phase][lib_label] -> list of values (one per repetition)
    samples: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)  # (phase, label) -> message
    load: list = field(default_factory=list)  # 1-min load average after each measurement

    def add(self, phase, label, value):
        self.samples.setdefault(phase, {}).setdefault(label, []).append(value)

    def med(self, phase, label):
        return common.median(self.samples.get(phase, {}).get(label, []))


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S', time.gmtime())}Z] {msg}", file=sys.stderr, flush=True)


# -- the measurements ------------------------------------------------------------


def m_enqueue_one(a, cfg, r):
    common.reset(r)
    t = a.enqueue_one(cfg.n_enqueue)
    return {"rate": cfg.n_enqueue / t}


def m_enqueue_bulk(a, cfg, r):
    common.reset(r)
    t = a.enqueue_bulk(cfg.n_enqueue, cfg.batch)
    return {"rate": cfg.n_enqueue / t}


def _process(n_procs):
    def m(a, cfg, r, variant):
        common.reset(r)
        a.prefill(cfg.n_process)
        r.config_resetstat()
        return {"rate": a.run_workers(cfg.n_process, n_procs, variant)}

    return m


def m_count(a, cfg, r):
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


def m_latency(a, cfg, r):
    common.reset(r)
    lat = a.pickup_latency(cfg.k_latency)
    return {"p50": common.percentile(lat, 50), "p99": common.percentile(lat, 99)}


def m_scale(a, cfg, r):
    """Item 6, for adapters that have the optional methods (EchoMQ)."""
    if not hasattr(a, "claim_complete_rate"):
        return None
    out = {}
    common.reset(r)
    out["small"] = a.claim_complete_rate(cfg.scale_small, cfg.scale_n)
    common.reset(r)
    out["large"] = a.claim_complete_rate(cfg.scale_large, cfg.scale_n)
    if hasattr(a, "admin_page_seconds"):
        common.reset(r)
        out["admin_ms"] = a.admin_page_seconds(cfg.admin_size) * 1000.0
    return out


def raw_limits(url, cfg):
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


PHASES = ("raw", "enq1", "enqbulk", "proc1", "proc2", "count", "lat", "scale")


def run(cfg, adapters, url, res: Results, only=PHASES):
    r = common.client(url)
    labels = {}  # adapter key -> list of (label, variant)
    for a in adapters:
        labels[a.key] = [(a.key if v is None else f"{a.key}:{v}", v) for v in a.variants]

    def each_lib(phase, fn, with_variants=False):
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
        ("enqbulk", m_enqueue_bulk, False),
        ("proc1", _process(1), True),
        ("proc2", _process(2), True),
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


# -- rendering -------------------------------------------------------------------


def fmt_rate(x):
    return "–" if x is None else f"{x:,.0f}"


def fmt_f(x, d=1):
    return "–" if x is None else f"{x:,.{d}f}"


def best_variant(res, phase, labels_for):
    """(value, label) of the best median among an adapter's variants."""
    best = (None, None)
    for label, _ in labels_for:
        v = res.med(phase, label)
        if v is not None and (best[0] is None or v > best[0]):
            best = (v, label)
    return best


def render(cfg, adapters, skipped, labels, res, meta):
    keys = [a.key for a in adapters]
    names = {a.key: a.name for a in adapters}
    cols = [k for k in ORDER if k in keys or k in skipped]
    title = {k: names.get(k) or skipped[k][0] for k in cols}

    def cell(k, fn):
        if k in skipped:
            return "skipped"
        return fn(k)

    def note(phase, k):
        """Footnote marker when any repetition of this library failed in this phase."""
        bad = [lab for (ph, lab) in res.errors if ph == phase and lab.split(":")[0] == k]
        return f"[^{k}-{phase}]" if bad else ""

    def missing(phase, k):
        return ("failed" if note(phase, k) else "–") + note(phase, k)

    def rate_cell(phase):
        def f(k):
            v = res.med(f"{phase}_rate", k)
            return missing(phase, k) if v is None else fmt_rate(v) + note(phase, k)

        return f

    def proc_cell(phase):
        def f(k):
            v, label = best_variant(res, f"{phase}_rate", labels[k])
            if v is None:
                return missing(phase, k)
            s = fmt_rate(v)
            if len(labels[k]) > 1:
                a = next(x for x in adapters if x.key == k)
                var = dict(labels[k])[label]
                s += f" ({a.variant_label(var)})"
            return s + note(phase, k)

        return f

    def pair_cell(p1, p2, d=1, phase=None):
        def f(k):
            a, b = res.med(p1, k), res.med(p2, k)
            if a is None and b is None:
                return missing(phase, k)
            return f"{fmt_f(a, d)} / {fmt_f(b, d)}" + note(phase, k)

        return f

    def total_cell(k):
        c = [res.med(f"count_{x}", k) for x in ("enq_client", "proc_client")]
        s = [res.med(f"count_{x}", k) for x in ("enq_server", "proc_server")]
        if None in c or None in s:
            return missing("count", k)
        return f"{sum(c):.1f} / {sum(s):.1f}" + note("count", k)

    rows = [
        ("1. Enqueue, one by one (jobs/s)", rate_cell("enq1")),
        ("1. Enqueue, bulk API (jobs/s)", rate_cell("enqbulk")),
        ("2. End-to-end, 1 worker process (jobs/s)", proc_cell("proc1")),
        ("2. End-to-end, 2 worker processes (jobs/s)", proc_cell("proc2")),
        (
            "3. Commands/job, enqueue: client / server",
            pair_cell("count_enq_client", "count_enq_server", phase="count"),
        ),
        (
            "3. Commands/job, processing: client / server",
            pair_cell("count_proc_client", "count_proc_server", phase="count"),
        ),
        ("3. Commands/job, total: client / server", total_cell),
        (
            "4. Pick-up latency, idle worker: p50 / p99 (ms)",
            pair_cell("lat_p50", "lat_p99", 2, phase="lat"),
        ),
    ]

    out = []
    w = out.append
    w("# EchoMQ benchmark results")
    w("")
    if "echomq" not in keys:
        why = skipped.get("echomq", ("", "not selected with --libs"))[1]
        w(
            f"**Peers only: EchoMQ not measured in this run** ({why}). The EchoMQ column, "
            "item 6 and the target checks come from a run that includes it."
        )
        w("")
    if cfg.mode == "quick":
        w("**Quick mode** (small N, few samples): a smoke test, not figures to quote.")
        w("")
    w(f"- Date: {meta['date']}; total run time {meta['duration']}")
    w(f"- Machine: {meta['machine']}; {meta['load']}")
    w(f"- Server: {meta['server']} (started by the harness, persistence off, loopback TCP)")
    w(f"- Client: {meta['client']}")
    for k in cols:
        if k in skipped:
            w(f"- {title[k]}: skipped: {skipped[k][1]}")
        else:
            a = next(x for x in adapters if x.key == k)
            w(f"- {a.name}: {meta['versions'].get(k) or '?'}")
    w(
        f"- Run: `{meta['command']}`; {cfg.reps} repetition(s), libraries interleaved, medians; "
        f"N = {cfg.n_enqueue:,} (enqueue), {cfg.n_process:,} (end-to-end), "
        f"{cfg.n_count:,} (command counts), {cfg.k_latency} latency samples per repetition; "
        f"bulk batches of {cfg.batch:,}"
    )
    w("")
    w("| | " + " | ".join(title[k] for k in cols) + " |")
    w("|---|" + "---:|" * len(cols))
    for label, fn in rows:
        w(f"| {label} | " + " | ".join(cell(k, fn) for k in cols) + " |")
    w("")
    w("Raw limits of the same server from the same client (item 5), redis-py:")
    w("")
    w("| EVALSHA of `return 1` | per second |")
    w("|---|---:|")
    w(f"| sequential, one round trip each | {fmt_rate(res.med('raw_seq', 'redis-py'))} |")
    w(
        f"| pipelined, {cfg.raw_pipe_batch} per round trip | "
        f"{fmt_rate(res.med('raw_pipe', 'redis-py'))} |"
    )
    w("")
    w(scale_section(cfg, res, "echomq" in keys))
    w("")
    w("## Targets (reported, not asserted)")
    w("")
    w(targets(cfg, adapters, skipped, labels, res))
    w("")
    w("## How it is measured")
    w("")
    w(
        "- **Fresh state**: FLUSHALL and CONFIG RESETSTAT before every measurement; the "
        "server is the harness's own embedded Valkey (never a shared one)."
    )
    w(
        "- **1. Enqueue**: one client process, connected and warmed before the clock "
        "starts; one-by-one waits for each call to return. Bulk uses each library's bulk "
        f"API in batches of {cfg.batch:,}: "
        + "; ".join(f"{a.name}: {a.bulk_api}" for a in adapters if a.bulk_api)
        + "."
    )
    w(
        "- **2. End-to-end**: N no-op jobs are enqueued first (not timed), then the worker "
        "processes are started. Every no-op task writes one byte to a FIFO the harness reads "
        "(no server round trip: the figure is the queue's, not the bookkeeping's); the first "
        "task of each process writes its start time too. Rate = jobs not yet done when the "
        "last process started its first task / (N-th task end − that start), the end seen "
        "by the harness within ~2 ms: interpreter start-up and imports are "
        "excluded for every library alike, and a second process that starts late does not "
        "count against the pair (if a process never gets a job, the clock starts at the "
        "first task)."
    )
    w(
        "- **3. Commands/job**: a separate, untimed pass with N jobs enqueued one by one "
        "and processed by one worker process. Server = `INFO commandstats` delta (every "
        "command the server ran, including those run by `redis.call` inside scripts and "
        "the library's own housekeeping: heartbeats, idle polls, start-up, amortised over N); "
        "client = server − the commands MONITOR shows as run from Lua (`[0 lua]`), i.e. "
        "commands sent over the wire (a pipelined command counts as one command). The "
        "harness's own commands are subtracted; the no-op task sends none."
    )
    w(
        "- **4. Pick-up latency**: one idle worker; the harness enqueues one job, waits "
        "for it to run, sleeps 50–150 ms (random) and repeats; latency = task start − "
        "the moment the enqueue call began (same machine clock), as measured inside the "
        f"task. 3 warm-up jobs are dropped. With {cfg.k_latency} samples per repetition, p99 "
        "is close to the maximum."
    )
    w(
        f"- **5. Raw limits**: redis-py with hiredis, one connection; "
        f"{cfg.n_raw_seq:,} sequential and {cfg.n_raw_pipe:,} pipelined EVALSHA."
    )
    for a in adapters:
        for note in a.notes:
            w(f"- {note}")
    w(
        "- All Python peers use redis-py (with hiredis) as their client; BullMQ uses "
        "ioredis. The no-op task and its bookkeeping are identical for every library "
        "(bench/tasks/probe.py, bench/bullmq/bench.js)."
    )
    if res.errors:
        w("")
        w("Failures (a figure next to a note is the median of the repetitions that succeeded):")
        w("")
        by_note = {}
        for (phase, label), e in sorted(res.errors.items()):
            k = label.split(":")[0]
            prefix = f"{label}: " if ":" in label else ""
            by_note.setdefault(f"{k}-{phase}", []).append(prefix + e)
        for key, msgs in by_note.items():
            w(f"[^{key}]: " + "; ".join(msgs))
    w("")
    return "\n".join(out)


def scale_section(cfg, res, measured):
    small, large = res.med("scale_small", "echomq"), res.med("scale_large", "echomq")
    admin = res.med("scale_admin_ms", "echomq")
    err = res.errors.get(("scale", "echomq"))
    if err:
        return f"Growth with work (item 6): failed: {err}"
    if small is None:
        why = "the adapter has no item-6 methods yet" if measured else "not in this run"
        return f"Growth with work (item 6): EchoMQ only, pending ({why})."
    ratio = large / small if small else None
    return "\n".join(
        [
            "Growth with work (item 6), EchoMQ:",
            "",
            "| | value |",
            "|---|---:|",
            f"| claim+complete, {cfg.scale_small:,} pending (jobs/s) | {fmt_rate(small)} |",
            f"| claim+complete, {cfg.scale_large:,} pending (jobs/s) | {fmt_rate(large)} |",
            f"| ratio large / small | {fmt_f(ratio, 2)} |",
            f"| admin list page over {cfg.admin_size:,} jobs (ms) | {fmt_f(admin, 2)} |",
        ]
    )


def targets(cfg, adapters, skipped, labels, res):
    if "echomq" not in labels:
        why = skipped.get("echomq", ("", "not selected with --libs"))[1]
        return f"Pending: EchoMQ not measured ({why})."
    py = [a.key for a in adapters if a.key not in ("echomq", "bullmq")]

    def best(phase, keys):
        vals = [(best_variant(res, phase, labels[k])[0], k) for k in keys]
        vals = [(v, k) for v, k in vals if v is not None]
        return max(vals) if vals else (None, None)

    e1 = best_variant(res, "proc1_rate", labels["echomq"])[0]
    p1, p1k = best("proc1_rate", py)
    b1 = (
        best_variant(res, "proc1_rate", labels.get("bullmq", []))[0] if "bullmq" in labels else None
    )
    eb = res.med("enqbulk_rate", "echomq")
    pb, pbk = best("enqbulk_rate", py)
    bb = res.med("enqbulk_rate", "bullmq")
    e_one = res.med("enq1_rate", "echomq")
    raw = res.med("raw_seq", "redis-py")
    cc = [res.med(f"count_{x}", "echomq") for x in ("enq_client", "proc_client")]
    lat50, lat99 = res.med("lat_p50", "echomq"), res.med("lat_p99", "echomq")

    def ratio(a, b):
        return None if a is None or not b else a / b

    def yes(ok):
        return "–" if ok is None else ("yes" if ok else "**no**")

    rows = []
    r = ratio(e1, p1)
    rows.append(
        (
            "End-to-end, 1 process ≥ 3× fastest Python peer",
            f"{fmt_f(r, 2)}× ({p1k})",
            yes(None if r is None else r >= 3),
        )
    )
    r = ratio(e1, b1)
    rows.append(
        (
            "End-to-end, 1 process ahead of BullMQ",
            f"{fmt_f(r, 2)}×",
            yes(None if r is None else r > 1),
        )
    )
    r = ratio(eb, bb)
    rows.append(
        (
            "Bulk enqueue ahead of BullMQ addBulk",
            f"{fmt_f(r, 2)}×",
            yes(None if r is None else r > 1),
        )
    )
    r = ratio(eb, pb)
    rows.append(
        (
            "Bulk enqueue ≥ 4× fastest Python peer's bulk",
            f"{fmt_f(r, 2)}× ({pbk})",
            yes(None if r is None else r >= 4),
        )
    )
    r = ratio(e_one, raw)
    rows.append(
        (
            "One-by-one enqueue within 20% of raw sequential EVALSHA",
            f"{fmt_f(r and r * 100, 0)}% of raw",
            yes(None if r is None else r >= 0.8),
        )
    )
    c = None if None in cc else sum(cc)
    rows.append(
        ("Client commands per job ≤ 2.5", fmt_f(c, 2), yes(None if c is None else c <= 2.5))
    )
    rows.append(
        (
            "Idle pick-up p50 < 2 ms, p99 < 10 ms",
            f"{fmt_f(lat50, 2)} / {fmt_f(lat99, 2)} ms",
            yes(None if lat50 is None else (lat50 < 2 and lat99 < 10)),
        )
    )
    small, large = res.med("scale_small", "echomq"), res.med("scale_large", "echomq")
    r = ratio(large, small)
    rows.append(
        (
            f"Rate at {cfg.scale_large:,} pending within 20% of {cfg.scale_small:,}",
            "pending" if r is None else f"{r * 100:.0f}%",
            yes(None if r is None else r >= 0.8),
        )
    )
    lines = ["| Target | Measured | Met |", "|---|---:|:---:|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def _first_line(path, prefix):
    try:
        with open(path) as f:
            return next((line for line in f if line.startswith(prefix)), "")
    except OSError:
        return ""


def machine():
    cpu = _first_line("/proc/cpuinfo", "model name").partition(":")[2].strip()
    mem = _first_line("/proc/meminfo", "MemTotal").split()
    ram = f"{int(mem[1]) / 1024 / 1024:.0f} GiB RAM" if len(mem) > 1 else ""
    return f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} CPUs, {ram}"


def main(argv=None):
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
            "load": load_note(res.load),
            "server": server.describe(url),
            "client": f"Python {platform.python_version()}, "
            + ", ".join(f"{d} {metadata.version(d)}" for d in ("redis", "hiredis") if _has_dist(d)),
            "versions": versions,
            "command": " ".join(["bash bench/run.sh", *(sys.argv[1:] if argv is None else argv)]),
        }
        text = render(cfg, adapters, skipped, labels, res, meta)
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
        kept = foreign_sections(args.output)
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


# The "## " sections render() writes; any other section in the output file was
# written by someone else (e.g. the chaos soak's) and is carried over as it is.
OWN_SECTIONS = ("## Targets (reported, not asserted)", "## How it is measured")


def foreign_sections(path):
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    kept, keep = [], False
    for line in lines:
        if line.startswith("## "):
            keep = line.strip() not in OWN_SECTIONS
        if keep:
            kept.append(line)
    return "\n".join(kept).strip() + "\n" if kept else ""


def load_note(samples):
    if not samples:
        return "load average not sampled"
    lo, mid, hi = min(samples), common.median(samples), max(samples)
    return f"1-min load average during the run {lo:.1f} / {mid:.1f} / {hi:.1f} (min / median / max)"


def _has_dist(name):
    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False
