"""The benchmark report (bench/report.py) renders what the runner measured, table by table.

No server: the harness's Results are filled by hand, the adapters are the real
ones (their names, variants and notes are what the tables print).
"""

from __future__ import annotations

from pathlib import Path

from bench import report
from bench.adapters import load
from bench.runner import QUICK, Results

META = {
    "date": "2026-12-01 00:00 UTC",
    "duration": "1.0 min",
    "machine": "test",
    "load": "load average not sampled",
    "server": "Valkey test",
    "client": "Python test",
    "versions": {},
    "command": "bash bench/run.sh --quick",
}


def _render(res: Results, keys: tuple[str, ...] = ("echomq", "vtasks")) -> str:
    adapters = [load(k) for k in keys]
    labels = {
        a.key: [(a.key if v is None else f"{a.key}:{v}", v) for v in a.variants] for a in adapters
    }
    return report.render(QUICK, adapters, {}, labels, res, META)


def _row(text: str, title: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(f"| {title} |"))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def test_server_cpu_row_is_that_of_the_fastest_variant() -> None:
    res = Results()
    res.add("proc1_rate", "echomq:1", 9000.0)
    res.add("proc1_srv_us", "echomq:1", 31.0)
    res.add("proc1_rate", "echomq:4", 7000.0)
    res.add("proc1_srv_us", "echomq:4", 55.0)
    res.add("proc1_rate", "vtasks:1", 3000.0)
    res.add("proc1_srv_us", "vtasks:1", 40.0)
    res.add("proc1_rate", "vtasks:20", 6000.0)
    res.add("proc1_srv_us", "vtasks:20", 22.0)
    text = _render(res)
    assert _row(text, "2. End-to-end, 1 worker process (jobs/s)") == ["9,000 (c=1)", "6,000 (c=20)"]
    assert _row(text, "2. Server CPU per job, 1 worker process (µs)") == ["31", "22"]


def test_supervised_row_and_the_two_process_target() -> None:
    res = Results()
    res.add("proc1_rate", "echomq:1", 5000.0)
    res.add("proc2_rate", "echomq:1", 6000.0)
    res.add("procsup_rate", "echomq:1", 7500.0)
    res.add("procsup_srv_us", "echomq:1", 48.0)
    res.add("procsup_rate", "echomq:4", 7000.0)
    res.add("procsup_srv_us", "echomq:4", 60.0)
    res.add("enqbulk_rate", "echomq", 20000.0)
    res.add("enq1_rate", "echomq", 5000.0)
    res.add("enq1_rate", "vtasks", 6000.0)
    res.add("enqbulk_rate", "vtasks", 10000.0)
    res.add("enqbulk_rate", "rq", 8000.0)
    text = _render(res, ("echomq", "vtasks", "threadmill", "rq"))
    assert _row(text, "2. End-to-end, one worker, 2 supervised processes (jobs/s)") == [
        "7,500 (c=1)", "–", "–", "–",
    ]  # fmt: skip
    assert _row(text, "2. Server CPU per job, 2 supervised processes (µs)") == ["48", "–", "–", "–"]
    # threadmill has no bulk call: "–", not "failed".
    assert _row(text, "1. Enqueue, bulk API (jobs/s)") == ["20,000", "10,000", "–", "8,000"]
    bulk = next(x for x in text.splitlines() if "fastest Python peer's bulk" in x)
    assert "2.00× (vtasks)" in bulk  # a peer with worker variants still counts by its key
    two = next(x for x in text.splitlines() if "≥ 1.4× 1 process" in x)
    assert "1.50×" in two and "| yes |" in two  # the better of the two 2-process figures
    one = next(x for x in text.splitlines() if "fastest peer's one-by-one" in x)
    assert "0.83× (vtasks)" in one and "**no**" in one


def test_first_job_and_the_startup_breakdown() -> None:
    res = Results()
    res.add("spawn_s", "echomq", 0.52)
    res.add("spawn_s", "vtasks", 0.31)
    for stage, secs in (("interpreter", 0.02), ("django_setup", 0.2), ("total", 0.5)):
        res.add(f"spawn_stage_{stage}", "echomq", secs)
    res.add("spawn_imp:echomq_django.checks", "echomq", 80.0)
    res.add("spawn_imp:django.urls", "echomq", 50.0)
    text = _render(res)
    assert _row(text, "7. First job done after spawn (s)") == ["0.52", "0.31"]
    target = next(x for x in text.splitlines() if "First job done ≤ 0.4 s" in x)
    assert "0.52 s" in target and "**no**" in target
    section = text.split(report.OWN_SECTIONS[1])[1].split("\n## ")[0]
    assert "| Python start-up (interpreter, site) | 20 |" in section
    assert "| **total, spawn to first job done** | 500 |" in section
    assert section.index("echomq_django.checks") < section.index("django.urls")  # heaviest first


def test_a_rewrite_keeps_other_tools_sections_only(tmp_path: Path) -> None:
    old = tmp_path / "RESULTS.md"
    old.write_text(
        "# EchoMQ benchmark results\n\n| old table |\n\n"
        f"{report.OWN_SECTIONS[1]}\n\nold breakdown\n\n"
        "## Chaos soak\n\nkept text\n\n"
        f"{report.OWN_SECTIONS[2]}\n\nold method\n"
    )
    kept = report.foreign_sections(str(old))
    assert kept == "## Chaos soak\n\nkept text\n"
