"""The scene every transition of the hostile-state tests acts on, and its snapshots.

A queue with a job in every place, jobs waiting on gates, holders of a debounce and a
throttle key, a due schedule; ``operations`` names each transition's call on it and the
rows it reads. ``snapshot``/``restore`` put a server back to the scene between calls;
``dump`` reads a keyspace by content, to compare before and after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from echomq_django.engine.jobs import Jobs
from echomq_django.engine.scheduler import Scheduler
from tests.schedules.conftest import backdate, every

from .conftest import QUEUE, WORKER, enqueue_n, error_json, new

GATED = "conc:t/1 rate:r/2/1000/2"


def server_ms(client) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


@dataclass
class Scene:
    """A queue with a job in each place, and the ids each transition acts on."""

    jobs: Jobs
    scheduler: Scheduler
    held: str = ""
    token: int = 0
    expired: str = ""
    pending: str = ""
    gated: tuple[str, ...] = ()
    debounced: str = ""
    throttled: str = ""
    far: str = ""
    due: str = ""
    dead: str = ""
    completed: str = ""

    @classmethod
    def build(cls, jobs: Jobs) -> Scene:
        client = jobs.connector.client
        enqueue_n(jobs, 4, max_attempts=3)
        done, failed = jobs.claim(QUEUE, WORKER, count=2, lease_ms=60_000).jobs
        jobs.complete(QUEUE, done.id, done.token)
        jobs.retry(QUEUE, failed.id, failed.token, error=error_json(), summary="x", give_up=True)
        (held,) = jobs.claim(QUEUE, WORKER, lease_ms=60_000, start_now=1).jobs
        (expired,) = jobs.claim(QUEUE, WORKER, lease_ms=1).jobs
        scene = cls(jobs, Scheduler(jobs), held.id, held.token, expired.id)
        scene.pending = jobs.enqueue(QUEUE, new(idempotency_key="k")).id
        scene.gated = tuple(enqueue_n(jobs, 3, limits=GATED))
        scene.debounced = jobs.enqueue(QUEUE, new(idempotency_key="d", debounce_ms=60_000)).id
        scene.throttled = jobs.enqueue(QUEUE, new(idempotency_key="t", throttle_ms=60_000)).id
        scene.far = jobs.enqueue(QUEUE, new(due_ms=server_ms(client) + 600_000)).id
        scene.due = jobs.enqueue(QUEUE, new(due_ms=server_ms(client) + 2)).id
        scene.dead, scene.completed = failed.id, done.id
        scene.scheduler.sync([every("beat", QUEUE), every("other", QUEUE)])
        backdate(client, QUEUE, "beat", server_ms(client) - 5000)
        time.sleep(0.01)  # the expired lease and the due job are due
        return scene


def operations(s: Scene) -> dict[str, tuple[Callable[[], Any], tuple[str, ...]]]:
    """Each transition's call, and the rows it reads (whose fields are planted)."""
    j, h, t = s.jobs, s.held, s.token
    return {
        "enqueue": (lambda: j.enqueue(QUEUE, new(limits=GATED)), ()),
        "enqueue_key": (lambda: j.enqueue(QUEUE, new(idempotency_key="k")), (s.pending,)),
        "debounce": (
            lambda: j.enqueue(QUEUE, new(idempotency_key="d", debounce_ms=60_000)),
            (s.debounced,),
        ),
        "throttle": (
            lambda: j.enqueue(QUEUE, new(idempotency_key="t", throttle_ms=60_000)),
            (s.throttled,),
        ),
        "claim": (lambda: j.claim(QUEUE, WORKER, count=10, claim_id="c1"), (*s.gated, s.due)),
        "complete": (lambda: j.complete(QUEUE, h, t), (h,)),
        "retry": (
            lambda: j.retry(QUEUE, h, t, error=error_json(), summary="s", backoff_ms=5),
            (h,),
        ),
        "give_up": (
            lambda: j.retry(QUEUE, h, t, error=error_json(), summary="s", give_up=True),
            (h,),
        ),
        "extend": (lambda: j.extend(QUEUE, h, t, 5000), (h,)),
        "release": (lambda: j.release(QUEUE, h, t), (h,)),
        "crashed": (lambda: j.crashed(QUEUE, h, t, why="died"), (h,)),
        "leave": (lambda: raise_entries(j.leave_many([(QUEUE, h, t)])), (h,)),
        "start": (lambda: raise_entries(j.start_many(WORKER, [(QUEUE, h, t)])), (h,)),
        "reap": (lambda: j.reap(QUEUE), (s.expired,)),
        "promote": (lambda: j.promote(QUEUE), (s.due,)),
        "trim": (lambda: j.trim(QUEUE, "dead", purge=True), (s.dead,)),
        "trim_completed": (lambda: j.trim(QUEUE, "completed", purge=True), (s.completed,)),
        "retry_dead": (lambda: j.retry_dead(QUEUE), (s.dead,)),
        "run_now": (lambda: j.run_now(QUEUE, s.far), (s.far,)),
        "cancel": (lambda: j.cancel(QUEUE, s.pending), (s.pending,)),
        "cancel_running": (lambda: j.cancel(QUEUE, h), (h,)),
        "delete": (lambda: j.delete(QUEUE, h), (h,)),
        "fire": (lambda: s.scheduler.fire_due([QUEUE]), ()),
        "schedule_run_now": (lambda: s.scheduler.run_now(QUEUE, "other"), ()),
        "schedule_pause": (lambda: s.scheduler.pause(QUEUE, "other"), ()),
        "schedule_remove": (lambda: s.scheduler.remove(QUEUE, "other"), ()),
    }


def raise_entries(entries: list[Any]) -> None:
    """A batch call answers each job's error as its entry: raise it, as the others do."""
    for entry in entries:
        if isinstance(entry, Exception):
            raise entry


READERS: dict[bytes, Callable[[Any, bytes], Any]] = {
    b"string": lambda raw, key: raw.get(key),
    b"hash": lambda raw, key: raw.hgetall(key),
    b"zset": lambda raw, key: raw.zrange(key, 0, -1, withscores=True),
    b"set": lambda raw, key: sorted(raw.smembers(key)),
    b"list": lambda raw, key: raw.lrange(key, 0, -1),
    b"stream": lambda raw, key: raw.xrange(key),
}


def dump(raw) -> dict[bytes, Any]:
    """Each key's type, value, and whether it expires (by content: DUMP's bytes change
    with a value's encoding, which a read may convert). The registry of queue names is
    left out: enqueue writes it first, apart from its transition (DESIGN.md: outside the
    queue's slot, never part of a script)."""
    found = {}
    for key in raw.scan_iter():
        if key != b"emq:queues":
            kind = raw.type(key)
            found[key] = (kind, READERS[kind](raw, key), raw.pttl(key) > 0)
    return found


def snapshot(raw) -> dict[bytes, tuple[bytes, int]]:
    """Every key as DUMP gives it, with its time to live: what ``restore`` takes."""
    return {key: (raw.dump(key), raw.pttl(key)) for key in raw.scan_iter()}


def restore(raw, snapshot: dict[bytes, tuple[bytes, int]]) -> None:
    raw.flushall()
    pipe = raw.pipeline(transaction=False)
    for key, (value, ttl) in snapshot.items():
        pipe.restore(key, max(ttl, 0), value)
    pipe.execute()


NAMES = list(operations(Scene(None, None)))  # type: ignore[arg-type]
