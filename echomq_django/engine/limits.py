"""Flow control: rate limits and concurrency caps, as the gates a job's row names.

A limit is enforced in the claim script on the server clock (``includes/limits.lua``),
so it holds across every worker and machine. This module is the one place that
parses a limit ("10/s", "100/15m burst 20") and writes the gate specs a row carries:

- ``rate:<scope>/<n>/<per_ms>/<burst>``: at most n starts per per_ms on average and
  at most ``burst`` at once (GCRA: in any window of W ms, at most burst + n·W/per_ms).
- ``conc:<scope>/<n>``: at most n jobs leased at once; a keyed cap's scope is
  ``<task>#<digest of the key>``, one cap per key. The keyed caps of a task are read
  together, as its family ``conc:<task>#*`` (``GateState.keys``): the server keeps no
  entry per key where the queue's limits are listed.

Scopes are task paths (or ``*`` for the queue's own rate limit); the keys of a gate are
in its queue's slot, so every limit is per queue: a task enqueued on two queues has
one limit on each.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .errors import InvalidJobOptions
from .validation import check_int

QUEUE_SCOPE = "*"  # the scope of a queue's own rate limit (no task path is '*')
MAX_GATES = 4  # a task's rate limit and cap, the queue's rate limit: 3; one spare
MAX_PERIOD_MS = 10**12 - 1  # a rate's longest period (about 31 years): parse and _GATE
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_RATE = re.compile(r"^\s*(\d{1,9})\s*/\s*(\d{0,6})\s*(ms|s|m|h|d)\s*(?:burst\s+(\d{1,9}))?\s*$")
_SCOPE = re.compile(r"^[^\s/#]{1,400}$")
# A '#' only in a cap, once, before its key's digest: '<task>#*' names a task's keyed caps
# together (their family), and no gate of a row may pass for one.
_GATE = re.compile(
    rf"^(?:rate:[^\s/#]{{1,480}}/(\d{{1,9}})/(\d{{1,{len(str(MAX_PERIOD_MS))}}})/(\d{{1,9}})"
    r"|conc:[^\s/#]{1,400}(?:#[^\s/#*]{1,64})?/(\d{1,9}))$"
)
KEYED = "#*"  # the end of a family's name: 'conc:<task>#*', all the task's keyed caps


@dataclass(frozen=True, slots=True)
class RateLimit:
    count: int  # starts ...
    per_ms: int  # ... per this many ms, on average
    burst: int = 1  # at most this many at once

    @classmethod
    def parse(cls, value: object, name: str = "rate_limit") -> RateLimit:
        """``"10/s"``, ``"600/m"``, ``"100/15m"``, ``"20/s burst 5"`` (units ms, s, m, h,
        d; burst defaults to 1: starts evenly spaced). ``InvalidJobOptions`` otherwise."""
        if isinstance(value, RateLimit):
            return value
        match = _RATE.match(value) if isinstance(value, str) else None
        if not match:
            raise InvalidJobOptions(
                f'{name} must look like "10/s", "600/m", "100/15m" or "20/s burst 5", '
                f"not {str(value)[:60]!r}"
            )
        count, amount, unit, burst = match.groups()
        per_ms = int(amount or 1) * _UNITS[unit]
        limit = cls(int(count), per_ms, int(burst or 1))
        if not (limit.count >= 1 and 1 <= limit.burst <= 10**6):
            raise InvalidJobOptions(f"{name}: count and burst must be positive")
        if not 1 <= limit.per_ms <= MAX_PERIOD_MS:
            raise InvalidJobOptions(f"{name}: the period must be from 1 ms to {MAX_PERIOD_MS} ms")
        return limit

    def gate(self, scope: str) -> str:
        return f"rate:{_scope(scope)}/{self.count}/{self.per_ms}/{self.burst}"

    def __str__(self) -> str:
        return f"{self.count} per {self.per_ms} ms, burst {self.burst}"


def concurrency(value: object, name: str = "concurrency") -> int:
    """A cap: an int from 1 to 1,000,000."""
    return check_int(value, 1, 10**6, name)


def concurrency_gate(scope: str, cap: int, key: str | None = None) -> str:
    """The gate of a cap; with ``key`` (the value of the task's concurrency_key), the
    cap counts the jobs of that key only. The key is digested: any text is a key."""
    scope = _scope(scope)
    if key is not None:
        if not isinstance(key, str) or not key:
            raise InvalidJobOptions("concurrency_key must give a non-empty str")
        try:
            raw = key.encode()
        except UnicodeEncodeError as exc:
            raise InvalidJobOptions("concurrency_key gave a str that is not UTF-8") from exc
        scope = f"{scope}#{hashlib.sha256(raw).hexdigest()[:32]}"
    return f"conc:{scope}/{concurrency(cap)}"


def validate_limits(limits: object) -> str:
    """A row's ``limits`` (gate specs joined by spaces), as enqueue sends it."""
    if not isinstance(limits, str):
        raise InvalidJobOptions(f"limits must be a str, not {type(limits).__name__}")
    gates = limits.split(" ") if limits else []
    if len(gates) > MAX_GATES or any(not _GATE.match(gate) for gate in gates):
        raise InvalidJobOptions(f"limits must be at most {MAX_GATES} gate specs: {limits[:80]!r}")
    return limits


def _scope(scope: str) -> str:
    if not isinstance(scope, str) or not _SCOPE.match(scope):
        raise InvalidJobOptions(f"a limit's scope must be a task path, not {str(scope)[:60]!r}")
    return scope


@dataclass(frozen=True, slots=True)
class GateState:
    """One limit of a queue as the server sees it now (``Jobs.limits``).

    A task's keyed caps (``concurrency_key``: one cap per key) come as one entry, its
    family: name ``conc:<task>#*``, ``level`` and ``waiting`` summed over its keys,
    ``keys`` the keys with a job leased now, ``spec`` the cap its last job was enqueued
    with (each job keeps its own)."""

    name: str  # 'rate:<scope>' or 'conc:<scope>'
    spec: str  # its gate spec as last enqueued (or claimed): the rule its jobs follow
    kind: str  # 'rate' or 'conc'
    scope: str  # the task path, '*' (the queue), or '<task>#*' (a task's keyed caps)
    level: float  # rate: tokens available now; conc: jobs leased now
    waiting: int  # jobs held back on it (pending, in order)
    keys: int | None = None  # a family: its keys with a job leased now; None: not keyed

    @property
    def keyed(self) -> bool:
        return self.name.endswith(KEYED)

    @property
    def describe(self) -> str:
        match = _GATE.match(self.spec.replace(KEYED + "/", "/", 1) if self.keyed else self.spec)
        if not match:
            return self.spec
        n, per, burst, cap = match.groups()
        if cap is not None:
            return f"at most {cap} at once" + (" per key" if self.keyed else "")
        return f"{n} per {_period(int(per))}, burst {burst}"


def _period(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}" if ms != size else unit
    return f"{ms}ms"
