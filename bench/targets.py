"""The target checks of the report: each target as a ratio of medians of the same run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from bench.figures import Labels, Skipped, best_variant, fmt_f, ratio

if TYPE_CHECKING:
    from bench.adapters.base import Adapter
    from bench.runner import Config, Results


def targets_table(cfg: Config, adapters: list[Adapter], skipped: Skipped, labels: Labels,
                  res: Results) -> list[str]:  # fmt: skip
    if "echomq" not in labels:
        why = skipped.get("echomq", ("", "not selected with --libs"))[1]
        return [f"Pending: EchoMQ not measured ({why})."]
    py = [a.key for a in adapters if a.key not in ("echomq", "bullmq")]
    peers = [a.key for a in adapters if a.key != "echomq"]

    def best_of(phase: str, keys: list[str]) -> tuple:
        vals = [(best_variant(res, phase, labels[k])[0], k) for k in keys]
        vals = [(v, k) for v, k in vals if v is not None]
        return max(vals) if vals else (None, None)

    def med_of(phase: str, keys: list[str]) -> tuple:
        vals = [(res.med(phase, k), k) for k in keys if res.med(phase, k) is not None]
        return max(vals) if vals else (None, None)

    def yes(ok: bool | None) -> str:
        return "–" if ok is None else ("yes" if ok else "**no**")

    def row(what: str, r: float | None, shown: str, ok: Callable[[float], bool]) -> tuple:
        return (what, shown, yes(None if r is None else ok(r)))

    e1 = best_variant(res, "proc1_rate", labels["echomq"])[0]
    e2 = best_variant(res, "proc2_rate", labels["echomq"])[0]
    esup = best_variant(res, "procsup_rate", labels["echomq"])[0]
    p1, p1k = best_of("proc1_rate", py)
    b1 = best_variant(res, "proc1_rate", labels.get("bullmq", []))[0]
    eb, bb = res.med("enqbulk_rate", "echomq"), res.med("enqbulk_rate", "bullmq")
    pb, pbk = med_of("enqbulk_rate", py)  # per library, not per worker variant
    e_one, raw = res.med("enq1_rate", "echomq"), res.med("raw_seq", "redis-py")
    f1, f1k = med_of("enq1_rate", peers)
    spawn = res.med("spawn_s", "echomq")
    cc = [res.med(f"count_{x}", "echomq") for x in ("enq_client", "proc_client")]
    lat50, lat99 = res.med("lat_p50", "echomq"), res.med("lat_p99", "echomq")
    small, large = res.med("scale_small", "echomq"), res.med("scale_large", "echomq")
    two = max((x for x in (e2, esup) if x is not None), default=None)
    c = None if None in cc else sum(cc)

    def x(r: float | None, who: str | None = None) -> str:
        return f"{fmt_f(r, 2)}×" + (f" ({who})" if who else "")

    rows = [
        row("One-by-one enqueue ≥ 1.1× the fastest peer's one-by-one", (r := ratio(e_one, f1)),
            x(r, f1k), lambda v: v >= 1.1),
        row("One-by-one enqueue ≥ 75% of raw sequential EVALSHA", (r := ratio(e_one, raw)),
            f"{fmt_f(r and r * 100, 0)}% of raw", lambda v: v >= 0.75),
        row("Bulk enqueue ≥ 1.5× BullMQ addBulk", (r := ratio(eb, bb)), x(r),
            lambda v: v >= 1.5),
        row("Bulk enqueue ≥ 4× fastest Python peer's bulk", (r := ratio(eb, pb)),
            x(r, pbk), lambda v: v >= 4),
        row("End-to-end, 1 process ≥ 1.5× BullMQ at its best concurrency", (r := ratio(e1, b1)),
            x(r), lambda v: v >= 1.5),
        row("End-to-end, 1 process ≥ 3× fastest Python peer", (r := ratio(e1, p1)),
            x(r, p1k), lambda v: v >= 3),
        row("End-to-end, 2 processes (best of 2 workers, `--processes 2`) ≥ 1.4× 1 process",
            (r := ratio(two, e1)), x(r), lambda v: v >= 1.4),
        row("First job done ≤ 0.4 s after spawn", spawn, f"{fmt_f(spawn, 2)} s",
            lambda v: v <= 0.4),
        row("Client commands per job ≤ 2.5", c, fmt_f(c, 2), lambda v: v <= 2.5),
        row("Idle pick-up p50 < 2 ms, p99 < 10 ms", lat50,
            f"{fmt_f(lat50, 2)} / {fmt_f(lat99, 2)} ms",
            lambda v: v < 2 and lat99 is not None and lat99 < 10),
        row(f"Rate at {cfg.scale_large:,} pending within 20% of {cfg.scale_small:,}",
            (r := ratio(large, small)), "pending" if r is None else f"{r * 100:.0f}%",
            lambda v: v >= 0.8),
    ]  # fmt: skip
    return ["| Target | Measured | Met |", "|---|---:|:---:|"] + [
        f"| {a} | {b} | {m} |" for a, b, m in rows
    ]
