"""Key names of one queue, and the validation that guards them.

One queue is one hash tag: every key of queue ``q`` is ``emq:{q}:...``, so all of
them hash to one cluster slot and a multi-key script can run at all. Queue
names, job ids and worker ids are validated before any key is built: an
ill-formed one raises a typed error and no command is sent.

Keys outside a queue's slot (the registry of queue names, the worker registry)
are never touched by a transition script; they are written with plain commands.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from functools import cached_property, lru_cache

from .errors import InvalidJobId, InvalidQueueName, InvalidSchedule, InvalidWorkerId

PREFIX = "emq"
STATES = ("pending", "scheduled", "active", "completed", "dead")

QUEUE_NAME_MAX = 100
_QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
# Canonical lowercase UUIDv7: version nibble 7, RFC 4122 variant (10xx).
_JOB_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
WORKER_ID_MAX = 200
# Worker ids are kept newline-joined in the row and quoted into JSON by Lua:
# printable ASCII without whitespace, quotes or backslashes.
_WORKER_ID = re.compile(r"[!#-\[\]-~]+")

QUEUES_KEY = f"{PREFIX}:queues"  # SET of queue names in use (outside any queue slot)
WORKERS_KEY = f"{PREFIX}:workers"  # ZSET worker id -> last heartbeat ms
WORKER_KEY_PREFIX = f"{PREFIX}:worker:"  # HASH per worker, with a TTL


def validate_queue_name(name: object) -> str:
    """Return ``name`` if it can be a queue name, else raise ``InvalidQueueName``."""
    if not isinstance(name, str):
        raise InvalidQueueName(f"queue name must be a string, not {type(name).__name__}")
    if not name:
        raise InvalidQueueName("queue name must not be empty")
    if len(name) > QUEUE_NAME_MAX:
        raise InvalidQueueName(f"queue name is longer than {QUEUE_NAME_MAX} characters")
    if not _QUEUE_NAME.fullmatch(name):
        raise InvalidQueueName(
            f"invalid queue name {name!r}: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit (no braces, colons, spaces or control characters)"
        )
    return name


def validate_schedule_name(name: object) -> str:
    """Return ``name`` if it can name a periodic schedule (the queue-name rules), else raise
    ``InvalidSchedule``: it becomes part of a key and of the job ids derived from its ticks."""
    try:
        return validate_queue_name(name)
    except InvalidQueueName as exc:
        raise InvalidSchedule(str(exc).replace("queue name", "schedule name")) from None


def validate_job_id(job_id: object) -> str:
    """Return ``job_id`` if it is a canonical lowercase UUIDv7, else raise ``InvalidJobId``."""
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        shown = job_id if isinstance(job_id, str) and len(job_id) <= 80 else type(job_id).__name__
        raise InvalidJobId(f"invalid job id {shown!r}: expected a lowercase UUIDv7")
    return job_id


def validate_worker_id(worker_id: object) -> str:
    """Return ``worker_id`` if a row can record it, else raise ``InvalidWorkerId``."""
    if (
        not isinstance(worker_id, str)
        or len(worker_id) > WORKER_ID_MAX
        or not _WORKER_ID.fullmatch(worker_id)
    ):
        raise InvalidWorkerId(
            f"invalid worker id {worker_id!r}: printable ASCII without spaces, quotes "
            f"or backslashes, at most {WORKER_ID_MAX} characters"
        )
    return worker_id


class _JobIds:
    """UUIDv7s (RFC 9562) that increase within this process, as Python 3.14's
    ``uuid.uuid7`` does: 48 bits of Unix milliseconds, then a 42-bit counter (random
    at each new millisecond, one up for each id within it), then 32 random bits.
    Ids made one after another sort in that order even within one millisecond, so a
    listing that breaks ties of equal times by id keeps the order jobs came in.

    The random bits come from ``os.urandom``, drawn ``POOL`` bytes at a time: one
    system call per several hundred ids instead of one or two per id (every enqueue
    makes one). A forked child drops the parent's pool and lock, so the two never
    hand out the same random bits."""

    POOL = 4096

    def __init__(self) -> None:
        self._forked()
        self._ms = 0
        self._counter = 0
        if hasattr(os, "register_at_fork"):  # not on Windows (no fork there)
            os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._at = 0

    def _random(self, n: int) -> int:
        """``n`` random bytes as an int (under the lock)."""
        at = self._at
        if at + n > len(self._pool):
            self._pool, at = os.urandom(self.POOL), 0
        self._at = at + n
        return int.from_bytes(self._pool[at : at + n], "big")

    def new(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms > self._ms:
                counter = self._random(6) & 0x1FF_FFFF_FFFF  # 41 bits: room to count
            else:  # the same millisecond (or the clock stepped back): count on
                ms, counter = self._ms, self._counter + 1
                if counter >> 42:  # spent: borrow the next millisecond
                    ms, counter = ms + 1, self._random(6) & 0x1FF_FFFF_FFFF
            self._ms, self._counter = ms, counter
            tail = self._random(4)
        value = (
            (ms & 0xFFFF_FFFF_FFFF) << 80
            | 0x7 << 76  # version 7
            | (counter >> 30) << 64  # rand_a: the counter's high 12 bits
            | 0x2 << 62  # variant 10
            | (counter & 0x3FFF_FFFF) << 32
            | tail
        )
        h = f"{value:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


new_job_id = _JobIds().new


@dataclass(frozen=True)
class QueueKeys:
    """All key names of one queue. Build it with ``QueueKeys.of(name)``."""

    queue: str

    @classmethod
    def of(cls, queue: str) -> QueueKeys:
        """The keys of ``queue`` (``InvalidQueueName`` if it cannot be one).

        One instance per name, remembered: every call of every transition builds its
        keys from here, and a fresh instance checked the name again and rebuilt each
        key string (its cached properties) on every call. A name that is not a plain
        ``str`` is checked and never remembered."""
        if type(queue) is not str:
            return cls(validate_queue_name(queue))
        return _queue_keys(queue)

    @cached_property
    def base(self) -> str:
        return f"{PREFIX}:{{{self.queue}}}:"

    @cached_property
    def pending(self) -> str:
        return self.base + "pending"

    @cached_property
    def scheduled(self) -> str:
        return self.base + "scheduled"

    @cached_property
    def active(self) -> str:
        return self.base + "active"

    @cached_property
    def completed(self) -> str:
        return self.base + "completed"

    @cached_property
    def dead(self) -> str:
        return self.base + "dead"

    @cached_property
    def metrics(self) -> str:
        return self.base + "metrics"

    @cached_property
    def seq(self) -> str:
        """Counter that orders jobs of equal priority first-in first-out."""
        return self.base + "seq"

    @cached_property
    def wake(self) -> str:
        """ZSET of one member that idle workers BZPOPMIN on; every move into pending ZADDs it."""
        return self.base + "wake"

    @cached_property
    def job_prefix(self) -> str:
        """Scripts build row keys from this prefix (same hash tag, same slot)."""
        return self.base + "job:"

    @cached_property
    def throughput_prefix(self) -> str:
        """Per-minute HASHes ``tp:<unix minute>`` (completed/failed), expiring after 2 hours."""
        return self.base + "tp:"

    def throughput(self, minute: int) -> str:
        return self.throughput_prefix + str(int(minute))

    def job(self, job_id: str) -> str:
        return self.job_prefix + validate_job_id(job_id)

    def state_set(self, state: str) -> str:
        if state not in STATES:
            raise ValueError(f"unknown state {state!r}; expected one of {', '.join(STATES)}")
        return self.base + state

    def claim(self, claim_id: str) -> str:
        """The record of one claim (its leased ids), for a replay after a lost reply."""
        return f"{self.base}claim:{claim_id}"

    @cached_property
    def schedules(self) -> str:
        """ZSET of the queue's periodic schedules: name -> next fire ms (+inf: paused, orphaned)."""
        return self.base + "schedules"

    def schedule(self, name: str) -> str:
        """HASH of one schedule: its definition (as synced from code) and its fire record."""
        return self.base + "schedule:" + validate_schedule_name(name)

    @property
    def events(self) -> str:
        """STREAM of job events, capped (``echomq tail``; engine/events.py)."""
        return self.base + "events"

    @property
    def limits(self) -> str:
        """HASH of the queue's flow-control gates: name -> spec (engine/limits.py)."""
        return self.base + "limits"

    def idempotency(self, digest: str) -> str:
        """Key that maps an idempotency key's digest to the job holding it."""
        return self.base + "idem:" + digest


@lru_cache(maxsize=4096)
def _queue_keys(queue: str) -> QueueKeys:
    """``QueueKeys.of`` of a ``str``: an invalid name raises, so it is never cached."""
    return QueueKeys(validate_queue_name(queue))


def worker_key(worker_id: str) -> str:
    return WORKER_KEY_PREFIX + validate_worker_id(worker_id)
