"""The soak's audit: the server's own data against the tasks' side logs.

Two independent witnesses. The server says where each job ended, how many
claims it took (``attempts``: the fencing token) and why each claim but the
last ended (the row's ``errors``: the task's failure, or ``LeaseExpired`` from
a reaper). The side logs (``bench/soak_tasks.py``) say which worker process
really ran which job under which token, and whether it got to the end.

Because a job is active under one token at a time and every claim ends in
exactly one of complete / retry (error appended) / reap (LeaseExpired appended)
/ release (refund), claim ``t`` of a job with no refunds ended with
``errors[t-1]``. That lets each execution be matched to its explanation.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

QUEUE = "soak"
STATES = ("pending", "scheduled", "active", "completed", "dead")
LEASE_EXPIRED = "echomq_django.engine.errors.LeaseExpired"
TASK_FAILURE = "bench.soak_tasks.SoakFailure"
FIELDS = ("state", "attempts", "refunds", "errors", "worker_ids", "result")


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
    """(job, token) -> {"starts": n, "worker": ..., "end": "ok" | "fail" | None}."""
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


def _audit_claims(a: Audit, rows: dict[str, dict[str, str | None]]) -> None:
    """Every claim ended in exactly one way: attempts = errors + refunds (+1 if completed)."""
    bad = []
    for jid, r in rows.items():
        final = 1 if r["state"] == "completed" else 0
        errors = len(_error_classes(r["errors"]))
        if int(r["attempts"] or 0) != final + errors + int(r["refunds"] or 0):
            bad.append(jid)
    a.add("claims not accounted for (attempts != errors + refunds + success)", len(bad), not bad)
    wrong_result = [
        jid
        for jid, r in rows.items()
        if r["state"] == "completed"
        and json.loads(r["result"] or "{}").get("token") != int(r["attempts"] or 0)
    ]
    a.add(
        "completed rows whose result is not the last token's", len(wrong_result), not wrong_result
    )
    a.add("claims total (server)", sum(int(r["attempts"] or 0) for r in rows.values()))


def _audit_executions(a: Audit, rows, runs, fleet) -> None:
    """Each execution in the side logs is the final one or is explained by the row."""
    twice = [k for k, run in runs.items() if run["starts"] > 1]
    a.add("executions sharing one (job, token)", len(twice), not twice)
    executions = sum(run["starts"] for run in runs.values())
    a.add("executions (side logs)", executions)
    a.add(
        "claims that never reached the task (read-ahead released, or held by a faulted worker)",
        sum(int(r["attempts"] or 0) for r in rows.values()) - executions,
    )
    ran = {job for job, _ in runs}
    a.add("executions beyond the first", sum(r["starts"] for r in runs.values()) - len(ran))

    why: Counter[str] = Counter()
    unexplained: list[tuple[str, int]] = []
    by_job: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for (jid, token), run in runs.items():
        by_job[jid][token] = run
    for jid, job_runs in by_job.items():
        row = rows.get(jid)
        endings = claim_endings(row, job_runs) if row else None
        for token, run in job_runs.items():
            reason = _explain(endings, token, run, fleet) if endings else ""
            if reason:
                why[reason] += 1
            else:
                unexplained.append((jid, token))
    for reason, n in sorted(why.items()):
        a.add(f"executions: {reason}", n)
    a.add("executions not explained", len(unexplained), not unexplained)
    if unexplained:
        a.add("first unexplained", f"{unexplained[:3]}")

    unlogged = [
        jid
        for jid, r in rows.items()
        if r["state"] == "completed" and (jid, int(r["attempts"] or 0)) not in runs
    ]
    a.add("completed jobs whose final execution is not in a side log", len(unlogged), not unlogged)
    cut = [k for k, run in runs.items() if run["end"] is None and run["worker"] not in fleet.killed]
    a.add("executions cut short in a worker that was not killed", len(cut), not cut)
    zombies = [
        k
        for k, run in runs.items()
        if run["end"] == "ok"
        and not (rows[k[0]]["state"] == "completed" and k[1] == int(rows[k[0]]["attempts"] or 0))
    ]
    a.add("successful executions whose complete was refused or never sent", len(zombies))


def claim_endings(row, runs: dict[int, dict[str, Any]]) -> dict[int, str] | None:
    """How each claim (token) of a job ended: an error class, "refund" or "final".

    Claims end in token order: the last claim of a completed job with success,
    every other one with an error appended to the row (``errors`` keeps their
    order) or with a refund (a release of a claim whose task never started: at
    a graceful stop, or a read-ahead job given back). A claim whose task never
    ran ended with a refund or ``LeaseExpired``; the search finds the placement
    of the refunds that makes the row's errors fit. None when none does.
    """
    attempts, refunds = int(row["attempts"] or 0), int(row["refunds"] or 0)
    errors = _error_classes(row["errors"])
    final = attempts if row["state"] == "completed" else None
    tokens = [t for t in range(1, attempts + 1) if t != final]

    def place(i: int, e: int, r: int) -> dict[int, str] | None:
        if i == len(tokens):
            return {} if (e, r) == (len(errors), 0) else None
        t, ran = tokens[i], tokens[i] in runs
        if not ran and r and (rest := place(i + 1, e, r - 1)) is not None:
            return {t: "refund", **rest}
        fits = e < len(errors) and (ran or errors[e] == LEASE_EXPIRED)
        if fits and (rest := place(i + 1, e + 1, r)) is not None:
            return {t: errors[e], **rest}
        return None

    endings = place(0, 0, refunds)
    if endings is not None and final:
        endings[final] = "final"
    return endings


def _explain(endings: dict[int, str], token: int, run, fleet) -> str:
    """Why this execution happened and how its claim ended; empty if nothing explains it."""
    ended = endings.get(token, "")
    if ended == "final":
        return "final, completed"
    if ended == TASK_FAILURE and run["end"] == "fail":
        return "ended by a task failure (retried, or dead)"
    if ended == LEASE_EXPIRED:
        return "re-run: lease expired, " + _lease_cause(run, run["worker"], fleet)
    return ""


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
