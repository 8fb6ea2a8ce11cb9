"""The Markdown report: one function per table or section, assembled by :func:`render`.

Every figure is a median over the repetitions (``Results.med``); a variant
column (worker concurrency, threads) shows the best median of its variants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench import common, startup
from bench.adapters import DJANGO_TASKS, ORDER
from bench.figures import Labels, Skipped, best_variant, fmt_f, fmt_rate, ratio
from bench.targets import targets_table

if TYPE_CHECKING:
    from bench.adapters.base import Adapter
    from bench.runner import Config, Results

# The "## " sections render() writes; any other section in the output file was
# written by someone else (e.g. the chaos soak's) and is carried over as it is.
OWN_SECTIONS = (
    "## Targets (reported, not asserted)",
    "## First job done after spawn: where EchoMQ's runworker spends it",
    "## How it is measured",
)


class Cells:
    """The cell formatters of the main table, over one run's results."""

    def __init__(self, adapters: list[Adapter], labels: Labels, res: Results) -> None:
        self.adapters = {a.key: a for a in adapters}
        self.labels = labels
        self.res = res

    def note(self, phase: str, k: str) -> str:
        """Footnote marker when any repetition of this library failed in this phase."""
        bad = [lab for (ph, lab) in self.res.errors if ph == phase and lab.split(":")[0] == k]
        return f"[^{k}-{phase}]" if bad else ""

    def missing(self, phase: str, k: str) -> str:
        return ("failed" if self.note(phase, k) else "–") + self.note(phase, k)

    def rate(self, phase: str, metric: str = "rate", d: int | None = None) -> Callable:
        def f(k: str) -> str:
            v = self.res.med(f"{phase}_{metric}", k)
            if v is None:
                return self.missing(phase, k)
            return (fmt_rate(v) if d is None else fmt_f(v, d)) + self.note(phase, k)

        return f

    def best(self, phase: str) -> Callable:
        def f(k: str) -> str:
            v, label = best_variant(self.res, f"{phase}_rate", self.labels[k])
            if v is None:
                return self.missing(phase, k)
            s = fmt_rate(v)
            if len(self.labels[k]) > 1:
                var = dict(self.labels[k])[label]
                s += f" ({self.adapters[k].variant_label(var)})"
            return s + self.note(phase, k)

        return f

    def best_cpu(self, phase: str) -> Callable:
        """Server CPU per job (µs) of the variant whose rate was best."""

        def f(k: str) -> str:
            _, label = best_variant(self.res, f"{phase}_rate", self.labels[k])
            label = label or k
            v = self.res.med(f"{phase}_srv_us", label)
            return self.missing(phase, k) if v is None else fmt_f(v, 0) + self.note(phase, k)

        return f

    def pair(self, p1: str, p2: str, d: int = 1, phase: str = "") -> Callable:
        def f(k: str) -> str:
            a, b = self.res.med(p1, k), self.res.med(p2, k)
            if a is None and b is None:
                return self.missing(phase, k)
            return f"{fmt_f(a, d)} / {fmt_f(b, d)}" + self.note(phase, k)

        return f

    def total(self, k: str) -> str:
        c = [self.res.med(f"count_{x}", k) for x in ("enq_client", "proc_client")]
        s = [self.res.med(f"count_{x}", k) for x in ("enq_server", "proc_server")]
        if None in c or None in s:
            return self.missing("count", k)
        return f"{sum(c):.1f} / {sum(s):.1f}" + self.note("count", k)


def main_table(
    adapters: list[Adapter], skipped: Skipped, labels: Labels, res: Results
) -> list[str]:
    names = {a.key: a.name for a in adapters}
    keys = list(names)
    cols = [k for k in ORDER if k in keys or k in skipped]
    title = {k: names.get(k) or skipped[k][0] for k in cols}
    c = Cells(adapters, labels, res)
    rows: list[tuple[str, Callable]] = [
        ("1. Enqueue, one by one (jobs/s)", c.rate("enq1")),
        ("1. Enqueue, `await aenqueue()` one by one (jobs/s)", c.rate("enqa")),
        ("1. Enqueue, bulk API (jobs/s)", c.rate("enqbulk")),
        ("2. End-to-end, 1 worker process (jobs/s)", c.best("proc1")),
        ("2. End-to-end, 2 worker processes (jobs/s)", c.best("proc2")),
        ("2. End-to-end, one worker, 2 supervised processes (jobs/s)", c.best("procsup")),
        ("2. Server CPU per job, 1 worker process (µs)", c.best_cpu("proc1")),
        ("2. Server CPU per job, 2 worker processes (µs)", c.best_cpu("proc2")),
        ("2. Server CPU per job, 2 supervised processes (µs)", c.best_cpu("procsup")),
        (
            "3. Commands/job, enqueue: client / server",
            c.pair("count_enq_client", "count_enq_server", phase="count"),
        ),
        (
            "3. Commands/job, processing: client / server",
            c.pair("count_proc_client", "count_proc_server", phase="count"),
        ),
        ("3. Commands/job, total: client / server", c.total),
        (
            "4. Pick-up latency, idle worker: p50 / p99 (ms)",
            c.pair("lat_p50", "lat_p99", 2, phase="lat"),
        ),
        ("7. First job done after spawn (s)", c.rate("spawn", "s", 2)),
    ]
    out = ["| | " + " | ".join(title[k] for k in cols) + " |", "|---|" + "---:|" * len(cols)]
    for label, fn in rows:
        cells = ("skipped" if k in skipped else fn(k) for k in cols)
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return out


def header(
    cfg: Config, adapters: list[Adapter], skipped: Skipped, meta: dict[str, Any]
) -> list[str]:
    keys = [a.key for a in adapters]
    out = ["# EchoMQ benchmark results", ""]
    if "echomq" not in keys:
        why = skipped.get("echomq", ("", "not selected with --libs"))[1]
        out += [
            f"**Peers only: EchoMQ not measured in this run** ({why}). The EchoMQ column, "
            "item 6 and the target checks come from a run that includes it.",
            "",
        ]
    if cfg.mode == "quick":
        out += ["**Quick mode** (small N, few samples): a smoke test, not figures to quote.", ""]
    out += [
        f"- Date: {meta['date']}; total run time {meta['duration']}",
        f"- Machine: {meta['machine']}; {meta['load']}",
        f"- Server: {meta['server']} (started by the harness, persistence off, loopback TCP)",
        f"- Client: {meta['client']}",
    ]
    names = {a.key: a.name for a in adapters}
    for k in ORDER:
        if k in skipped:
            out.append(f"- {skipped[k][0]}: skipped: {skipped[k][1]}")
        elif k in names:
            out.append(f"- {names[k]}: {meta['versions'].get(k) or '?'}")
    out.append(
        f"- Run: `{meta['command']}`; {cfg.reps} repetition(s), libraries interleaved, medians; "
        f"N = {cfg.n_enqueue:,} (enqueue), {cfg.n_process:,} (end-to-end), "
        f"{cfg.n_count:,} (command counts), {cfg.k_latency} latency samples per repetition, "
        f"{cfg.spawn_runs} spawns per repetition (first job); bulk batches of {cfg.batch:,}"
    )
    return out


def raw_table(cfg: Config, res: Results) -> list[str]:
    return [
        "Raw limits of the same server from the same client (item 5), redis-py:",
        "",
        "| EVALSHA of `return 1` | per second |",
        "|---|---:|",
        f"| sequential, one round trip each | {fmt_rate(res.med('raw_seq', 'redis-py'))} |",
        f"| pipelined, {cfg.raw_pipe_batch} per round trip | "
        f"{fmt_rate(res.med('raw_pipe', 'redis-py'))} |",
    ]


def scale_table(cfg: Config, res: Results, measured: bool) -> list[str]:
    small, large = res.med("scale_small", "echomq"), res.med("scale_large", "echomq")
    admin = res.med("scale_admin_ms", "echomq")
    err = res.errors.get(("scale", "echomq"))
    if err:
        return [f"Growth with work (item 6): failed: {err}"]
    if small is None:
        why = "the adapter has no item-6 methods yet" if measured else "not in this run"
        return [f"Growth with work (item 6): EchoMQ only, pending ({why})."]
    return [
        "Growth with work (item 6), EchoMQ:",
        "",
        "| | value |",
        "|---|---:|",
        f"| claim+complete, {cfg.scale_small:,} pending (jobs/s) | {fmt_rate(small)} |",
        f"| claim+complete, {cfg.scale_large:,} pending (jobs/s) | {fmt_rate(large)} |",
        f"| ratio large / small | {fmt_f(ratio(large, small), 2)} |",
        f"| admin list page over {cfg.admin_size:,} jobs (ms) | {fmt_f(admin, 2)} |",
    ]


def startup_table(res: Results) -> list[str]:
    """Item 7's breakdown for EchoMQ's runworker (bench/startup.py), medians in ms."""
    total = res.med("spawn_stage_total", "echomq")
    if total is None:
        return ["Not measured in this run (phase `spawn` with EchoMQ)."]
    out = [
        "One job waiting, `runworker` spawned under `bench/startup_probe.py` (the real command "
        "with timestamps around it; the first claim built (`Jobs.claim_call`) and its reply "
        "read (`Claim.from_reply`), and the system checks, wrapped to mark them). Each stage "
        "is the time since the previous mark; medians (ms).",
        "",
        "| Stage | ms |",
        "|---|---:|",
    ]
    for stage, what in startup.STAGES:
        v = res.med(f"spawn_stage_{stage}", "echomq")
        out.append(f"| {what} | {fmt_f(v and v * 1000, 0)} |")
    out.append(f"| **total, spawn to first job done** | {fmt_f(total * 1000, 0)} |")
    prefix = f"spawn_{startup.IMPORT_PREFIX}"
    imports = [
        (res.med(phase, "echomq"), phase.removeprefix(prefix))
        for phase in res.samples
        if phase.startswith(prefix)
    ]
    if imports:
        out += [
            "",
            "Heaviest top-level imports of the same command (`python -X importtime ... "
            "runworker --help`: settings, apps and the command module; cumulative, medians):",
            "",
            "| Module | ms |",
            "|---|---:|",
        ]
        out += [f"| `{m}` | {fmt_f(ms, 1)} |" for ms, m in sorted(imports, reverse=True)]
    return out


def method_section(cfg: Config, adapters: list[Adapter]) -> list[str]:
    out = [
        "- **Fresh state**: FLUSHALL and CONFIG RESETSTAT before every measurement; the "
        "server is the harness's own embedded Valkey (never a shared one).",
        "- **1. Enqueue**: one client process, connected and warmed before the clock "
        "starts; one-by-one waits for each call to return. The Django Tasks backends ("
        + ", ".join(a.name for a in adapters if a.key in DJANGO_TASKS)
        + ") all enqueue the same kind of `@task` with `task.enqueue()`; `await aenqueue()` "
        "runs the same loop inside one `asyncio.run` (Django's default `aenqueue` is "
        "`sync_to_async(enqueue)`, a thread hop per call; django-vtasks has its own). Bulk "
        f"uses each library's bulk API in batches of {cfg.batch:,}: "
        + "; ".join(f"{a.name}: {a.bulk_api}" for a in adapters if a.bulk_api)
        + ".",
        "- **2. End-to-end**: N no-op jobs are enqueued first (not timed), then the worker "
        "processes are started. Every no-op task writes one byte to a FIFO the harness reads "
        "(no server round trip: the figure is the queue's, not the bookkeeping's); the first "
        "task of each process writes its start time too. Rate = jobs not yet done when the "
        "last process started its first task / (N-th task end − that start), the end seen "
        "by the harness within ~2 ms: interpreter start-up and imports are "
        "excluded for every library alike, and a second process that starts late does not "
        "count against the pair (if a process never gets a job, the clock starts at the "
        "first task). The supervised row is one worker command whose supervisor runs 2 task "
        "processes, each with the same concurrency variants as a worker process (clock "
        "from the second child's first task). Server CPU per job = "
        "(`used_cpu_user` + `used_cpu_sys` of `INFO cpu` after − before the worker run) / N, "
        "for the variant with the best rate: the server shares the cores with the workers.",
        "- **7. First job done after spawn**: one job waiting, one worker process spawned "
        "(its default settings; BullMQ concurrency 8); time from just before the spawn to "
        f"the moment the harness sees the job's end; median of {cfg.spawn_runs} spawns per "
        "repetition, then of the repetitions.",
        "- **3. Commands/job**: a separate, untimed pass with N jobs enqueued one by one "
        "and processed by one worker process. Server = `INFO commandstats` delta (every "
        "command the server ran, including those run by `redis.call` inside scripts and "
        "the library's own housekeeping: heartbeats, idle polls, start-up, amortised over N); "
        "client = server − the commands MONITOR shows as run from Lua (`[0 lua]`), i.e. "
        "commands sent over the wire (a pipelined command counts as one command). The "
        "harness's own commands are subtracted; the no-op task sends none.",
        "- **4. Pick-up latency**: one idle worker; the harness enqueues one job, waits "
        "for it to run, sleeps 50–150 ms (random) and repeats; latency = task start − "
        "the moment the enqueue call began (same machine clock), as measured inside the "
        f"task. 3 warm-up jobs are dropped. With {cfg.k_latency} samples per repetition, p99 "
        "is close to the maximum.",
        f"- **5. Raw limits**: redis-py with hiredis, one connection; "
        f"{cfg.n_raw_seq:,} sequential and {cfg.n_raw_pipe:,} pipelined EVALSHA.",
    ]
    out += [f"- {note}" for a in adapters for note in a.notes]
    out.append(
        "- The Python peers use redis-py (with hiredis) as their client, except django-vtasks "
        "(its own Rust client, django-vcache); BullMQ uses ioredis. The no-op task and its "
        "bookkeeping are identical for every library (bench/tasks/probe.py, "
        "bench/bullmq/bench.js)."
    )
    return out


def failures(res: Results) -> list[str]:
    if not res.errors:
        return []
    out = [
        "",
        "Failures (a figure next to a note is the median of the repetitions that succeeded):",
        "",
    ]
    by_note: dict[str, list[str]] = {}
    for (phase, label), e in sorted(res.errors.items()):
        k = label.split(":")[0]
        prefix = f"{label}: " if ":" in label else ""
        by_note.setdefault(f"{k}-{phase}", []).append(prefix + e)
    out += [f"[^{key}]: " + "; ".join(msgs) for key, msgs in by_note.items()]
    return out


def render(cfg: Config, adapters: list[Adapter], skipped: Skipped, labels: Labels,
           res: Results, meta: dict[str, Any]) -> str:  # fmt: skip
    measured = "echomq" in {a.key for a in adapters}
    parts = [
        *header(cfg, adapters, skipped, meta), "",
        *main_table(adapters, skipped, labels, res), "",
        *raw_table(cfg, res), "",
        *scale_table(cfg, res, measured), "",
        OWN_SECTIONS[0], "", *targets_table(cfg, adapters, skipped, labels, res), "",
        OWN_SECTIONS[1], "", *startup_table(res), "",
        OWN_SECTIONS[2], "", *method_section(cfg, adapters),
        *failures(res), "",
    ]  # fmt: skip
    return "\n".join(parts)


def foreign_sections(path: str) -> str:
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


def load_note(samples: list[float]) -> str:
    if not samples:
        return "load average not sampled"
    lo, mid, hi = min(samples), common.median(samples), max(samples)
    return f"1-min load average during the run {lo:.1f} / {mid:.1f} / {hi:.1f} (min / median / max)"
