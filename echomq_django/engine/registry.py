"""The worker registry: who is working, on what, seen when.

It lives outside every queue's slot (``emq:workers`` and ``emq:worker:<id>``), so
it is written with plain commands and never inside a transition script: the
scripts stay single-slot. Each worker's HASH carries a TTL that its heartbeat
renews, so a worker killed with SIGKILL disappears on its own; the ``emq:workers``
ZSET is only an index, and ids whose HASH has expired are dropped when read.

The registry is for people (the admin, the CLI). Correctness never depends on it:
leases and the reaper decide who holds a job.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from redis.typing import EncodableT, FieldT

from .connector import Connector, translate_error
from .json_text import read_json
from .keyspace import WORKERS_KEY, validate_queue_name, validate_worker_id, worker_key

logger = logging.getLogger("echomq.registry")

DEFAULT_TTL_S = 30.0


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    running: list[str]  # ids of the jobs this worker holds
    started_at: float  # Unix seconds
    last_seen: float  # Unix seconds (the worker's clock at its last heartbeat)
    # The slots reserved per queue (``runworker default:4 slow:1``; unsized queues share
    # the rest), and the child processes the jobs run in (0: threads of the worker).
    # Entries written before these fields existed read as neither.
    sizes: dict[str, int] = field(default_factory=dict)
    processes: int = 0

    def queue_labels(self) -> list[str]:
        return queue_labels(self.queues, self.sizes)

    def to_fields(self) -> dict[FieldT, EncodableT]:
        """The HASH to write (every value a str), typed as redis-py's ``hset`` takes it."""
        return {
            "host": self.host,
            "pid": str(self.pid),
            "queues": json.dumps(self.queues),
            "concurrency": str(self.concurrency),
            "running": json.dumps(self.running),
            "started_at": repr(self.started_at),
            "last_seen": repr(self.last_seen),
            "sizes": json.dumps(self.sizes),
            "processes": str(self.processes),
        }

    @classmethod
    def from_fields(cls, worker_id: str, fields: dict[str, str]) -> WorkerInfo:
        """Read a HASH written by ``to_fields``; ``ValueError`` if it cannot be one.

        The HASH is server data anyone with write access can plant: every field is
        checked, so what a reader gets can be shown (a time a datetime can hold).
        """
        try:
            queues = read_json(fields["queues"])
            running = read_json(fields["running"])
            sizes = read_json(fields.get("sizes", "{}"))
            processes = int(fields.get("processes", "0"))
            if processes < 0:
                raise ValueError(f"processes must be >= 0, not {processes}")
            if not isinstance(queues, list) or not isinstance(running, list):
                raise ValueError("queues and running must be JSON arrays")
            if len(queues) > MAX_WORKER_QUEUES or len(running) > MAX_WORKER_QUEUES:
                raise ValueError(f"more than {MAX_WORKER_QUEUES} queues or running jobs")
            for queue in queues:  # they become metrics labels and page rows
                validate_queue_name(queue)
            if not isinstance(sizes, dict) or not all(
                type(n) is int and n > 0 for n in sizes.values()
            ):
                raise ValueError("sizes must be a JSON object of positive integers")
            return cls(
                id=worker_id,
                host=fields["host"],
                pid=int(fields["pid"]),
                queues=[str(q) for q in queues],
                concurrency=int(fields["concurrency"]),
                running=[str(j) for j in running],
                started_at=_unix_seconds(fields["started_at"]),
                last_seen=_unix_seconds(fields["last_seen"]),
                sizes=sizes,  # JSON object keys are strings already
                processes=processes,
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"worker entry {worker_id!r} is incomplete: {exc}") from None
        except RecursionError:
            raise ValueError(f"worker entry {worker_id!r} nests its JSON too deeply") from None


def queue_labels(queues: Sequence[str], sizes: Mapping[str, int]) -> list[str]:
    """The queues as ``runworker`` takes them: a sized one as ``name:slots``."""
    return [f"{q}:{sizes[q]}" if q in sizes else q for q in queues]


# The most queues (and running jobs) one worker entry may list: a planted entry with
# 20,000 must not turn into 20,000 metrics series.
MAX_WORKER_QUEUES = 1000

# The latest time a worker entry may carry (year 2286): any datetime can show it.
_LATEST_S = 1e10


def _unix_seconds(text: str) -> float:
    value = float(text)
    if not 0 <= value < _LATEST_S:  # also false for nan
        raise ValueError(f"{text[:40]!r} is not a Unix time in seconds")
    return value


def heartbeat(connector: Connector, info: WorkerInfo, ttl_s: float = DEFAULT_TTL_S) -> None:
    """Write ``info`` and give it ``ttl_s`` seconds to live (one pipelined round trip)."""
    key = worker_key(info.id)
    pipe = connector.client.pipeline(transaction=False)
    pipe.hset(key, mapping=info.to_fields())
    pipe.pexpire(key, max(1, int(ttl_s * 1000)))
    pipe.zadd(WORKERS_KEY, {info.id: int(info.last_seen * 1000)})
    try:
        pipe.execute()
    except Exception as exc:
        raise translate_error(exc) from exc


def remove(connector: Connector, worker_id: str) -> None:
    """Forget a worker at once (a clean shutdown; a dead one expires by itself)."""
    pipe = connector.client.pipeline(transaction=False)
    pipe.delete(worker_key(worker_id))
    pipe.zrem(WORKERS_KEY, worker_id)
    try:
        pipe.execute()
    except Exception as exc:
        raise translate_error(exc) from exc


def list_workers(connector: Connector) -> list[WorkerInfo]:
    """The live workers, by id. Index entries whose HASH expired are pruned."""
    client = connector.client
    try:
        # The members, as str (decode_responses): redis-py types any ZRANGE reply form.
        ids = cast(list[str], client.zrange(WORKERS_KEY, 0, -1))
        valid = [i for i in ids if _is_worker_id(i)]
        pipe = client.pipeline(transaction=False)
        for worker_id in valid:
            pipe.hgetall(worker_key(worker_id))
        rows = pipe.execute(raise_on_error=False) if valid else []
    except Exception as exc:
        raise translate_error(exc) from exc
    workers, gone = [], [i for i in ids if not _is_worker_id(i)]
    for worker_id, fields in zip(valid, rows):
        if isinstance(fields, Exception):  # e.g. WRONGTYPE: one bad entry must not hide the rest
            logger.warning("skipping an unreadable worker entry %s: %s", worker_id, fields)
            continue
        if not fields:
            gone.append(worker_id)
            continue
        try:
            workers.append(WorkerInfo.from_fields(worker_id, fields))
        except ValueError as exc:
            logger.warning("skipping an unreadable worker entry: %s", exc)
    if gone:
        try:
            client.zrem(WORKERS_KEY, *gone)
        except Exception as exc:  # pruning is housekeeping: a read must not fail on it
            logger.debug("could not prune expired workers: %s", exc)
    return sorted(workers, key=lambda w: w.id)


def _is_worker_id(value: str) -> bool:
    try:
        validate_worker_id(value)
    except ValueError:
        return False
    return True
