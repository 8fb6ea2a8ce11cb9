"""The ``Jobs`` reads: a row, the counts, a page of a place, the gates, the throughput.

Plain reads or read-only scripts: none of them changes anything, so none of them
needs to be a transition.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import redis

from . import script
from .bounds import PAGE_MAX, THROUGHPUT_MAX_MINUTES
from .connector import Connector, plain, translate_error
from .errors import CorruptRow
from .keyspace import STATES, QueueKeys, validate_job_id
from .limits import GateState
from .replies import Page, PageEntry, QueueStats, counter, pairs
from .rows import Job
from .validation import check_int

logger = logging.getLogger("echomq.limits")
# The most entries of a queue's rules (emq:{q}:limits) one read lists: one per rate limit
# or cap of a task (a task's keyed caps: one), so far above any project's count.
LIMITS_READ = 10_000


class Reads:
    """Mixed into ``Jobs``: the reads over its connector."""

    connector: Connector

    def get(self, queue: str, job_id: str) -> Job | None:
        """The row, or None. Raises ``CorruptRow`` for a row that cannot be a job (a key
        of another type included)."""
        key = QueueKeys.of(queue).job(job_id)
        try:
            row: Any = self.connector.client.hgetall(key)
        except redis.ResponseError as exc:  # WRONGTYPE, for one: _job says what it means
            row = exc
        except Exception as exc:
            raise translate_error(exc) from exc
        return _job(queue, job_id, row)

    def find(self, queues: Sequence[str], job_id: str) -> Job | None:
        """The row of ``job_id`` in the first of ``queues`` that holds it (an id does not
        name its queue): one round trip, a pipeline of reads. ``CorruptRow`` as ``get``."""
        validate_job_id(job_id)
        queues = list(queues)
        pipe = self.connector.client.pipeline(transaction=False)
        for queue in queues:
            pipe.hgetall(QueueKeys.of(queue).job(job_id))
        rows = plain(lambda: pipe.execute(raise_on_error=False))
        for queue, row in zip(queues, rows, strict=True):
            if job := _job(queue, job_id, row):
                return job
        return None

    def stats(self, queue: str) -> QueueStats:
        keys = QueueKeys.of(queue)
        stats = script.load("stats")
        reply = self.connector.run(stats, stats.keys_for(keys))
        counts = dict(zip(STATES, (int(n) for n in reply[1:6])))
        metrics = {k: n for k, v in pairs(reply[6]).items() if (n := counter(v)) is not None}
        return QueueStats(queue, int(reply[0]), counts, metrics)

    def limits(self, queue: str, most: int = LIMITS_READ) -> list[GateState]:
        """The queue's rate limits and caps now (one read-only script): tokens or running
        count, and the jobs held back on each. Every gate of the queue and its tasks is
        listed, and each task's keyed caps as one entry (``GateState.keys``): the work
        does not grow with the keys in use. ``most``: the most entries of the queue's
        rules read (one per gate of a task, never one per key); past it, a warning."""
        check_int(most, 1, 100_000, "most")
        limit_stats = script.load("limit_stats")
        reply = self.connector.run(limit_stats, limit_stats.keys_for(QueueKeys.of(queue)), [most])
        if not int(reply[0]):
            logger.warning(
                "queue %s has over %d limits: those past them are not listed", queue, most
            )
        gates = []
        for name, spec, level, waiting, keys in reply[1:]:
            kind, _, scope = name.partition(":")
            count = int(keys) if int(keys) >= 0 else None
            gates.append(GateState(name, spec, kind, scope, float(level), int(waiting), count))
        return sorted(gates, key=lambda gate: gate.name)

    def throughput(self, queue: str, minutes: int = 60) -> list[tuple[int, int, int]]:
        """(unix minute, completed, failed) for the last ``minutes`` minutes, oldest first.

        ``failed`` counts failed attempts (retried or dead-lettered).
        """
        keys = QueueKeys.of(queue)
        check_int(minutes, 1, THROUGHPUT_MAX_MINUTES, "minutes")
        now_s, _ = plain(self.connector.client.time)
        last = int(now_s) // 60
        span = range(last - minutes + 1, last + 1)
        pipe = self.connector.client.pipeline(transaction=False)
        for minute in span:
            pipe.hmget(keys.throughput(minute), "completed", "failed")
        return [
            (minute, counter(done) or 0, counter(failed) or 0)
            for minute, (done, failed) in zip(span, plain(pipe.execute))
        ]

    def page(
        self,
        queue: str,
        state: str,
        *,
        offset: int = 0,
        count: int = 50,
        newest_first: bool = False,
        fields: Sequence[str] = ("task", "attempts", "max_attempts", "enqueued_at", "last_error"),
    ) -> Page:
        """One page of a place's sorted set: never reads the whole set."""
        keys = QueueKeys.of(queue)
        check_int(offset, 0, 2**40, "offset")
        check_int(count, 1, PAGE_MAX, "count")
        page = script.load("page")
        reply = self.connector.run(
            page,
            page.keys_for(keys, state_set=state),
            [offset, count, 1 if newest_first else 0, *fields],
        )
        entries = [
            PageEntry(e[0], float(e[1]), dict(zip(fields, e[2:], strict=False))) for e in reply[1:]
        ]
        return Page(int(reply[0]), entries)


def _job(queue: str, job_id: str, row: Mapping[str, str | None] | Exception) -> Job | None:
    """A row's HGETALL as a job (None: no key); ``CorruptRow`` when it cannot be one,
    a key of another type (WRONGTYPE) too; any other error reply as the engine's error."""
    if isinstance(row, Exception):
        if isinstance(row, redis.ResponseError) and str(row).startswith("WRONGTYPE"):
            raise CorruptRow(f"the key of job {job_id[:80]} is not a row (a HASH)")
        raise translate_error(row)
    return Job.of_key(queue, job_id, row) if row else None
