"""A walk of one queue's keyspace that checks DESIGN.md's invariants on what it holds.

``violations`` reads every row and place of the queue (SCAN and single-key reads, so a
cluster client routes them too) and names each breach of:

* one place: a row is in exactly one of pending / scheduled / active / completed /
  dead, the one its ``state`` names; a pending job waiting on a gate is in that gate's
  line (``held:<name>``, and its family's for a keyed cap) instead of pending;
* no place holds an id without a row, no line holds a job that does not wait on it;
* the fence: an active row has a worker, a whole lease deadline and a token
  (``attempts``) of at least 1; a row's ``attempts`` is a whole number when present.

Keys planted on purpose (a test's hostile value) are skipped by the caller's
``ignore``, so the walk checks what the transition did, not what the test planted.
"""

from __future__ import annotations

from collections.abc import Iterable

from echomq_django.engine.keyspace import STATES, QueueKeys


def _pattern(keys: QueueKeys, tail: str) -> str:
    return keys.base.replace("{", "\\{").replace("}", "\\}") + tail


def _family(name: str) -> str | None:
    """A keyed cap's family (unhold.lua's gate_family): its job waits in both lines."""
    task, sep, _ = name.partition("#")
    return f"{task}#*" if sep and task.startswith("conc:") else None


def _whole(value: str | None) -> bool:
    return value is not None and value.lstrip("-").isdigit()


def violations(client, queue: str, ignore: Iterable[str] = ()) -> list[str]:
    """Every breach of the invariants in ``queue``'s keyspace, as readable lines."""
    keys, skip = QueueKeys.of(queue), set(ignore)
    where: dict[str, list[str]] = {}
    for state in STATES:
        place = keys.state_set(state)
        if place not in skip and client.type(place) == "zset":
            for job_id in client.zrange(place, 0, -1):
                where.setdefault(job_id, []).append(state)
    lines: dict[str, set[str]] = {}
    for line in client.scan_iter(match=_pattern(keys, "held:*")):
        if line not in skip and client.type(line) == "zset":
            name = line.removeprefix(keys.base + "held:")
            for job_id in client.zrange(line, 0, -1):
                lines.setdefault(job_id, set()).add(name)
    rows = {}
    for row_key in client.scan_iter(match=_pattern(keys, "job:*")):
        if row_key not in skip and client.type(row_key) == "hash":
            rows[row_key.removeprefix(keys.job_prefix)] = client.hgetall(row_key)
    found = [f"{job_id} is in {places} without a row" for job_id, places in where.items()
             if job_id not in rows]  # fmt: skip
    found += [f"{job_id} waits in {names} without a row" for job_id, names in lines.items()
              if job_id not in rows]  # fmt: skip
    for job_id, row in rows.items():
        found += _row_violations(job_id, row, where.get(job_id, []), lines.get(job_id, set()))
    return found


def _row_violations(job_id: str, row: dict[str, str], places: list[str], held_in: set[str]):
    state, held = row.get("state"), row.get("held", "")
    if held:
        wanted = {held} | ({_family(held)} - {None})
        if state != "pending" or places or held_in != wanted:
            yield f"{job_id} ({state}, held by {held}) is in {places} and lines {held_in}"
    elif places != [state] or held_in:
        yield f"{job_id} ({state}) is in {places} and lines {held_in or '{}'}"
    if "attempts" in row and not _whole(row["attempts"]):
        yield f"{job_id} has attempts {row['attempts']!r}"
    if state == "active":
        if not row.get("worker") or not _whole(row.get("lease_deadline")):
            yield f"{job_id} is active without a worker or a lease deadline: {row}"
        if not _whole(row.get("attempts")) or int(row["attempts"]) < 1:
            yield f"{job_id} is active without a token: {row.get('attempts')!r}"


def assert_sound(client, queue: str, ignore: Iterable[str] = ()) -> None:
    found = violations(client, queue, ignore)
    assert not found, "\n".join(found)
