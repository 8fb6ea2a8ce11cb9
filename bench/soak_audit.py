"""The soak's audit: the server's own data against the tasks' side logs.

Two independent witnesses. The server says where each job ended, how many
claims it took (``attempts``: the fencing token), how many of them began a run
(``worker_ids``: one per run) and why each claim but the last ended (the row's
``errors``: the task's failures; ``refunds``: releases and leases the reaper
returned, which cost the job nothing). The side logs (``bench/soak_tasks.py``)
say which worker process really ran which job in which run (the task's
``context.attempt``), and whether it got to the end.

Every claim ends in exactly one of complete / retry (error appended) / release or
reap (refund), so attempts = task errors + refunds (+1 if completed); every
execution is the final one, a task failure, or a run whose lease a fault took.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

QUEUE = "soak"
STATES = ("pending", "scheduled", "active", "completed", "dead")
WORKER_CRASHED = "echomq_django.engine.errors.WorkerCrashed"
TASK_FAILURE = "bench.soak_tasks.SoakFailure"
FIELDS = ("state", "attempts", "refunds", "errors", "worker_ids", "result", "max_attempts")


@dataclass
class Check:
    name: str
    value: Any
    ok: bool | None = None  # None: a number reported, not a pass/fail check


@dataclass
class Audit:
    checks: list[Check] = field(default_factory=list)

    def add(self, name: str, value: Any, ok: bool | None = None) -> None:
        self.checks.append(Check(name, value, ok))

    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks)

    def table(self) -> str:
        lines = ["| check | value | |", "|---|---:|---|"]
        for c in self.checks:
            mark = "" if c.ok is None else ("ok" if c.ok else "**FAIL**")
            lines.append(f"| {c.name} | {c.value} | {mark} |")
        lines.append(f"\n**audit: {'PASS' if self.ok else 'FAIL'}**")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.__dict__ for c in self.checks]}


def read_rows(client, ids: list[str]) -> dict[str, dict[str, str | None]]:
    rows: dict[str, dict[str, str | None]] = {}
    for i in range(0, len(ids), 1000):
        chunk = ids[i : i + 1000]
        pipe = client.pipeline(transaction=False)
        for jid in chunk:
            pipe.hmget(f"emq:{{{QUEUE}}}:job:{jid}", *FIELDS)
        for jid, values in zip(chunk, pipe.execute()):
            rows[jid] = {f: (v.decode() if v is not None else None) for f, v in zip(FIELDS, values)}
    return rows


def read_places(client) -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for state in STATES:
        for member in client.zrange(f"emq:{{{QUEUE}}}:{state}", 0, -1):
            where[member.decode()].append(state)
    return where


def read_side_logs(folder: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """(job, run number) -> {"starts": n, "worker": ..., "end": "ok" | "fail" | None}."""
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    for path in sorted(folder.glob("exec-*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            run = runs.setdefault(
                (rec["job"], rec["token"]), {"starts": 0, "worker": rec["worker"], "end": None}
            )
            if rec["event"] == "start":
                run["starts"] += 1
            else:
                run["end"] = rec["event"]
    return runs


def count_in_logs(folder: Path, pattern: str, text: str) -> int:
    return sum(p.read_text(errors="replace").count(text) for p in folder.glob(pattern))


def _task_errors(errors: str | None) -> list[str]:
    """The errors that ended a claim: all but the WorkerCrashed notes (refunded claims)."""
    return [e for e in _error_classes(errors) if e != WORKER_CRASHED]


def _error_classes(errors: str | None) -> list[str]:
    return [e.get("exception_class_path", "?") for e in json.loads(errors or "[]")]


def audit(client, plans: dict[str, str], side: Path, fleet, out: Path, elapsed: float) -> Audit:
    a = Audit()
    ids = list(plans)
    rows = read_rows(client, ids)
    where = read_places(client)
    runs = read_side_logs(side)
    metrics = {k.decode(): int(v) for k, v in client.hgetall(f"emq:{{{QUEUE}}}:metrics").items()}
    states = Counter(r["state"] for r in rows.values())
    kinds = Counter(kind for _, kind, _ in fleet.events)

    a.add("jobs enqueued", len(ids), len(ids) == fleet.opts.jobs == metrics.get("enqueued"))
    a.add("completed", states["completed"])
    a.add("dead", states["dead"])
    a.add(
        "enqueued = completed + dead",
        f"{len(ids)} = {states['completed']} + {states['dead']}",
        len(ids) == states["completed"] + states["dead"],
    )
    lost = [j for j, r in rows.items() if r["state"] not in ("completed", "dead")]
    a.add("lost (not completed or dead)", len(lost), not lost)
    breaches = [j for j in ids if where.get(j, []) != [rows[j]["state"]]]
    a.add("rows in two places, or not where the row says", len(breaches), not breaches)
    foreign = set(where) - set(plans)
    a.add("ids in a place without an enqueue", len(foreign), not foreign)
    a.add(
        "metrics match rows (completed, dead)",
        f"{metrics.get('completed', 0)}, {metrics.get('dead', 0)}",
        (metrics.get("completed", 0), metrics.get("dead", 0))
        == (states["completed"], states["dead"]),
    )
    poison_alive = [j for j, p in plans.items() if p == "poison" and rows[j]["state"] != "dead"]
    a.add("poison jobs not dead", len(poison_alive), not poison_alive)
    # Per-job accounting: faults of the fleet (kills, lost replies, restarts) only delay
    # a job. A job dead for any reason but its own task's failures (as many as its
    # max_attempts; crash notes beside them are refunded claims) is a broken promise.
    healthy_dead = [
        j
        for j, r in rows.items()
        if r["state"] == "dead"
        and (
            _task_errors(r["errors"]).count(TASK_FAILURE) < int(r["max_attempts"] or 0)
            or set(_task_errors(r["errors"])) != {TASK_FAILURE}
        )
    ]
    a.add("jobs dead without a task failure of their own", len(healthy_dead), not healthy_dead)
    if healthy_dead:
        a.add(
            "first dead without a task failure of its own (id: errors)",
            [f"{j}: {_error_classes(rows[j]['errors'])}" for j in healthy_dead[:3]],
        )
    a.add(
        "crashes charged (WorkerCrashed: a worker died running the job alone)",
        sum(_error_classes(r["errors"]).count(WORKER_CRASHED) for r in rows.values()),
    )

    _audit_claims(a, rows)
    _audit_executions(a, rows, runs, fleet)

    a.add("faults: worker SIGKILLs", kinds["SIGKILL"])
    a.add("faults: worker SIGTERMs (graceful stop)", kinds["SIGTERM"])
    a.add("faults: worker SIGSTOPs (2 x lease)", kinds["SIGSTOP"])
    # SIGTERM before the worker installed its handler ends it at once (-15): fine, as
    # long as it had claimed nothing yet.
    claimers = {w for r in rows.values() for w in (r["worker_ids"] or "").split("\n")}
    unclean = [
        name
        for name, proc in fleet.retiring.items()
        if proc.returncode != 0 and (proc.returncode != -15 or name in claimers)
    ]
    a.add("SIGTERMed workers that did not stop cleanly", len(unclean), not unclean)
    a.add(
        "refunds (unstarted claims released: graceful stop, read-ahead given back)",
        sum(int(r["refunds"] or 0) for r in rows.values()),
    )
    a.add("faults: server restarts (AOF)", kinds["server restart"])
    a.add("faults: network cuts (every worker and reaper connection)", kinds["network cut"])
    a.add("faults: lost replies (a script ran, its caller saw a cut)", kinds["lost reply"])
    a.add(
        "zombie outcomes refused by the fence (StaleToken on complete/retry)",
        count_in_logs(out, "soak-*.log", "but its lease was lost"),
    )
    a.add(
        "zombie outcomes discarded (heartbeat saw the lease lost first)",
        count_in_logs(out, "soak-*.log", "after its lease was lost"),
    )
    a.add("wall time (s)", f"{elapsed:.0f}")
    a.add("throughput (jobs/s, with chaos)", f"{len(ids) / elapsed:.0f}")
    return a


def _runs(row: dict[str, str | None]) -> int:
    """How many runs the row records: one worker id per lease whose run began."""
    return len([w for w in (row["worker_ids"] or "").split("\n") if w])


def _audit_claims(a: Audit, rows: dict[str, dict[str, str | None]]) -> None:
    """Every claim ended in exactly one way: attempts = task errors + refunds (+1 if
    completed). A lease lost to a fault is refunded (a crash it caused alone also
    records a WorkerCrashed, which spends no attempt)."""
    bad = []
    for jid, r in rows.items():
        final = 1 if r["state"] == "completed" else 0
        errors = len(_task_errors(r["errors"]))
        if int(r["attempts"] or 0) != final + errors + int(r["refunds"] or 0):
            bad.append(jid)
    a.add(
        "claims not accounted for (attempts != task errors + refunds + success)", len(bad), not bad
    )
    wrong_result = [
        jid
        for jid, r in rows.items()
        if r["state"] == "completed" and json.loads(r["result"] or "{}").get("token") != _runs(r)
    ]
    a.add("completed rows whose result is not the last run's", len(wrong_result), not wrong_result)
    a.add("claims total (server)", sum(int(r["attempts"] or 0) for r in rows.values()))
    a.add("runs total (server: worker ids)", sum(_runs(r) for r in rows.values()))


def _audit_executions(a: Audit, rows, runs, fleet) -> None:
    """Each execution in the side logs (keyed by job and run number, the task's
    ``context.attempt``) is the final one or is explained by a task failure or a fault."""
    twice = [k for k, run in runs.items() if run["starts"] > 1]
    a.add("executions sharing one (job, run)", len(twice), not twice)
    executions = sum(run["starts"] for run in runs.values())
    a.add("executions (side logs)", executions)
    a.add(
        "runs marked that never reached the task (their worker died first)",
        sum(_runs(r) for r in rows.values()) - executions,
    )
    ran = {job for job, _ in runs}
    a.add("executions beyond the first", executions - len(ran))

    why: Counter[str] = Counter()
    unexplained: list[tuple[str, int]] = []
    for (jid, n), run in runs.items():
        row = rows.get(jid)
        reason = _explain(row, n, run, fleet) if row else ""
        if reason:
            why[reason] += 1
        else:
            unexplained.append((jid, n))
    for reason, count in sorted(why.items()):
        a.add(f"executions: {reason}", count)
    a.add("executions not explained", len(unexplained), not unexplained)
    if unexplained:
        a.add("first unexplained", f"{unexplained[:3]}")

    unlogged = [
        jid for jid, r in rows.items() if r["state"] == "completed" and (jid, _runs(r)) not in runs
    ]
    a.add("completed jobs whose final execution is not in a side log", len(unlogged), not unlogged)
    # A graceful stop whose grace runs out kills the child still running a job, and
    # only then releases it (issue 15: no overlap): that run is cut short by design.
    # On a loaded machine a child restarted just before the SIGTERM may start its job
    # seconds late, and run into the grace.
    # With --processes, a child whose supervisor is SIGSTOPped past its leases' renewal
    # ends itself before they lapse (no overlap with the run the reaper hands on).
    unended = [run["worker"] for run in runs.values() if run["end"] is None]
    stopped_itself = {w for w in unended if fleet.opts.processes and w in fleet.paused}
    cut = [w for w in unended if w not in fleet.killed | fleet.termed and w not in stopped_itself]
    a.add("executions cut short in a worker that was not killed", len(cut), not cut)
    a.add(
        "executions cut short by a graceful stop's grace",
        sum(w in fleet.termed and w not in fleet.killed for w in unended),
    )
    a.add(
        "executions cut short by a child of a paused supervisor (before its leases lapsed)",
        sum(w in stopped_itself and w not in fleet.killed | fleet.termed for w in unended),
    )
    zombies = [
        k
        for k, run in runs.items()
        if run["end"] == "ok"
        and not (rows[k[0]]["state"] == "completed" and k[1] == _runs(rows[k[0]]))
    ]
    a.add("successful executions whose complete was refused or never sent", len(zombies))


def _explain(row, n: int, run, fleet) -> str:
    """Why this execution happened and how it ended; empty if nothing explains it."""
    runs = _runs(row)
    if n > runs:
        return ""  # the row does not know this run: nothing explains it
    if row["state"] == "completed" and n == runs:
        return "final, completed" if run["end"] == "ok" else ""
    if run["end"] == "fail":
        return "ended by a task failure (retried, or dead)"
    return "re-run: lease lost, " + _lease_cause(run, run["worker"], fleet)


def _lease_cause(run, worker: str, fleet) -> str:
    """What made a lease expire, from what happened to the worker that held it."""
    if run["end"] is None and worker in fleet.killed:
        return "SIGKILL cut the execution"
    if worker in fleet.paused:
        return "worker SIGSTOPped (zombie finished late)"
    if worker in fleet.termed:
        return "worker SIGTERMed (release refused or lost)"
    if worker in fleet.killed:
        return "SIGKILL between the task's end and its complete"
    return "no fault on its worker (server restart or stall)"
