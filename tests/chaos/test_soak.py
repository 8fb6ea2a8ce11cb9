"""The CI variant of the chaos soak: ``bench/soak.py`` small, with every fault, about a minute.

Real ``runworker`` and ``runreaper`` processes, SIGKILLs, SIGTERMs and SIGSTOPs
of workers, network cuts and lost replies, one server restart with AOF; the soak's own audit must pass (nothing
lost, nothing in two places, one execution per token, every re-execution
explained). The full-size run (100,000 jobs) is in bench/RESULTS.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "fleet",
    [
        ["--jobs", "2500", "--workers", "2", "--threads", "4"],
        # Supervisors of two children each: SIGKILLs hit the supervisor, whose children
        # die with it; SIGSTOPs freeze it while its children run on.
        ["--jobs", "1500", "--workers", "2", "--threads", "2", "--processes", "2"],
    ],
    ids=["threads", "processes"],
)
def test_small_chaos_soak_audits_clean(tmp_path, server, fleet):
    report = tmp_path / "audit.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), *fleet, "--reapers", "2",
         "--minutes", "3", "--lease", "0.5", "--kill-every", "2", "--term-every", "3", "--pause-every", "4", "--cut-every", "1",
         "--binary", server.binary, "--out", str(tmp_path / "run"), "--json", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    checks = {c["name"]: c for c in json.loads(report.read_text())["checks"]}
    assert [c for c in checks.values() if c["ok"] is False] == []  # (names the failed ones)
    assert checks["lost (not completed or dead)"]["value"] == 0
    # Default attempt settings: the fleet's faults cost no healthy job its life.
    assert checks["jobs dead without a task failure of their own"]["value"] == 0
    assert checks["faults: worker SIGKILLs"]["value"] >= 3
    assert checks["faults: worker SIGTERMs (graceful stop)"]["value"] >= 1
    assert checks["faults: worker SIGSTOPs (2 x lease)"]["value"] >= 1
    assert checks["faults: server restarts (AOF)"]["value"] == 1
    net = (
        "faults: network cuts (every worker and reaper connection)",
        "faults: lost replies (a script ran, its caller saw a cut)",
    )
    assert sum(checks[name]["value"] for name in net) >= 3
    assert checks["executions beyond the first"]["value"] > 0
