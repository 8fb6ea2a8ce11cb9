"""What a caller asks to store (``NewJob``), checked whole before anything is sent,
and what enqueue answers (``Enqueued``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .bounds import (
    DEFAULT_DEAD_TTL_MS,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_RESULT_TTL_MS,
    MAX_ATTEMPTS,
    MAX_DELAY_MS,
    MAX_DUE_MS,
    MAX_LEASE_MS,
    MAX_PRIORITY,
    MIN_PRIORITY,
)
from .errors import InvalidJobOptions, PayloadTooLarge
from .keyspace import new_job_id, validate_job_id
from .limits import validate_limits
from .validation import check_int, one_line, utf8

# The integer fields checked at every enqueue, in order: (name, lowest, highest). A value
# of exactly int within range passes at the cost of one comparison; anything else goes
# to check_int, which raises the error naming it (an int subclass in range passes there).
_INT_FIELDS = (
    ("priority", MIN_PRIORITY, MAX_PRIORITY),
    ("max_attempts", 1, MAX_ATTEMPTS),
    ("lease_ms", 0, MAX_LEASE_MS),
    ("timeout_ms", 0, MAX_LEASE_MS),
    ("due_ms", 0, MAX_DUE_MS),
    ("result_ttl_ms", 0, MAX_DELAY_MS),
    ("dead_ttl_ms", 0, MAX_DELAY_MS),
)
_VARIANT_FIELDS = (("throttle_ms", 0, MAX_DELAY_MS), ("debounce_ms", 0, MAX_DELAY_MS))


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob:
    """What enqueue stores. ``payload`` is opaque to the engine (the Django layer's JSON)."""

    payload: str
    task: str = ""
    id: str = field(default_factory=new_job_id)
    priority: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    lease_ms: int = 0  # 0: the worker's default lease
    due_ms: int = 0  # absolute Unix ms; 0 or past: ready now
    run_after: str = ""  # the caller's exact value, kept opaque (e.g. an ISO datetime)
    result_ttl_ms: int = DEFAULT_RESULT_TTL_MS
    dead_ttl_ms: int = DEFAULT_DEAD_TTL_MS
    idempotency_key: str | None = None
    timeout_ms: int = 0  # 0: no time limit of its own (the worker's cap may still apply)
    limits: str = ""  # its flow-control gates (engine/limits.py); "": none
    # The idempotency key's variant (at most one; both need a key): throttle, one job
    # per key per window whatever its state; debounce, the key's waiting job takes
    # this payload and runs this long after the last enqueue.
    throttle_ms: int = 0
    debounce_ms: int = 0

    def validate(self, max_payload: int = DEFAULT_MAX_PAYLOAD) -> NewJob:
        """Raise a typed error for any bad field; nothing has been sent yet."""
        if not isinstance(self.payload, str):
            raise InvalidJobOptions(f"payload must be a str, not {type(self.payload).__name__}")
        size = len(utf8(self.payload, "payload"))
        if size > max_payload:
            raise PayloadTooLarge(f"payload is {size} bytes, over the limit of {max_payload}")
        validate_job_id(self.id)
        if self.task:
            one_line(self.task, "task", 500)
        self._check_ints(_INT_FIELDS)
        if not isinstance(self.run_after, str) or len(self.run_after) > 100:
            raise InvalidJobOptions("run_after must be a string of at most 100 characters")
        utf8(self.run_after, "run_after")
        if self.idempotency_key is not None:
            key = self.idempotency_key
            if not isinstance(key, str) or not 0 < len(key) <= 1000:
                raise InvalidJobOptions("idempotency_key must be a non-empty string (≤ 1000 chars)")
            utf8(key, "idempotency_key")
        validate_limits(self.limits)
        self._check_ints(_VARIANT_FIELDS)
        if (self.throttle_ms or self.debounce_ms) and self.idempotency_key is None:
            raise InvalidJobOptions("throttle and debounce need an idempotency key")
        if self.throttle_ms and self.debounce_ms:
            raise InvalidJobOptions("a job is throttled or debounced, not both")
        return self

    def _check_ints(self, checked: tuple[tuple[str, int, int], ...]) -> None:
        for name, low, high in checked:
            value = getattr(self, name)
            if type(value) is not int or not low <= value <= high:
                check_int(value, low, high, name)

    @property
    def idempotency_digest(self) -> str | None:
        """Where the key is held: a digest of the task and the key together.

        Scoped to the task: ``a.using(idempotency_key="k")`` and ``b.using(...="k")``
        are two jobs, so ``b.enqueue()`` never hands back ``a``'s job. (A task path
        holds no NUL, so no two (task, key) pairs share the text hashed.)
        """
        if self.idempotency_key is None:
            return None
        return idempotency_digest(self.task, self.idempotency_key)

    @property
    def variant(self) -> str:
        """The key's variant as enqueue.lua reads it."""
        if self.throttle_ms:
            return f"t{self.throttle_ms}"
        return f"d{self.debounce_ms}" if self.debounce_ms else ""


def idempotency_digest(task: str, key: str) -> str:
    """The SHA-256 hex digest under which ``task``'s idempotency key ``key`` is held."""
    return hashlib.sha256(f"{task}\0{key}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Enqueued:
    id: str
    state: str
    created: bool  # False: an idempotency key matched a job (see enqueue.lua)
    enqueued_at: int | None = None  # the row's enqueued_at (server µs)
    debounced: bool = False  # the key's waiting job took this payload (created False)

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> Enqueued:
        at = int(reply[3]) if reply[3] else None
        return cls(reply[0], reply[1], reply[2] == 1, at, reply[2] == 2)
