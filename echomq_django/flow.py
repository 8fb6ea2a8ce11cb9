"""Flow control of a task, Django side: its limits and its idempotency key's variant.

``@task(rate_limit="10/s", concurrency=2, concurrency_key=lambda customer_id: ...,
unique_for=timedelta(minutes=1), debounce=timedelta(seconds=5))`` and
``OPTIONS["RATE_LIMITS"] = {"emails": "100/m"}`` become the fields of the job's
row that the engine's claim enforces (see :mod:`echomq_django.engine.limits`).
Parsed once per Task (the backend remembers it); the concurrency key, a function
of the arguments, is evaluated at each enqueue and stored in the row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .engine.errors import InvalidJobOptions
from .engine.limits import QUEUE_SCOPE, RateLimit, concurrency, concurrency_gate
from .options import duration_ms, positive_ms

FLOW_OPTIONS = ("rate_limit", "concurrency", "concurrency_key", "unique_for", "debounce")


@dataclass(frozen=True, slots=True)
class TaskFlow:
    rate: RateLimit | None = None
    cap: int | None = None
    key: Callable[..., Any] | None = None
    throttle_ms: int = 0
    debounce_ms: int = 0

    @classmethod
    def of(cls, task: Any) -> TaskFlow:
        """The task's flow options; ``InvalidJobOptions`` for a bad one (nothing is sent)."""
        rate, cap, key, unique_for, debounce = (getattr(task, n, None) for n in FLOW_OPTIONS)
        if key is not None and not callable(key):
            raise InvalidJobOptions("concurrency_key must be a function of the task's arguments")
        if key is not None and cap is None:
            raise InvalidJobOptions("concurrency_key needs concurrency=N (jobs at once per key)")
        if unique_for is not None and debounce is not None:
            raise InvalidJobOptions("a task has unique_for or debounce, not both")
        return cls(
            rate=None if rate is None else RateLimit.parse(rate),
            cap=None if cap is None else concurrency(cap),
            key=key,
            throttle_ms=positive_ms(unique_for, "unique_for") or 0,
            debounce_ms=duration_ms(debounce, "debounce") or 0,
        )

    def limits(
        self,
        task_path: str,
        queue_rate: RateLimit | None,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
    ) -> str:
        """The row's gates for one enqueue (the key function runs here, on the arguments)."""
        gates = []
        if queue_rate is not None:
            gates.append(queue_rate.gate(QUEUE_SCOPE))
        if self.rate is not None:
            gates.append(self.rate.gate(task_path))
        if self.cap is not None:
            value = None
            if self.key is not None:
                value = self.key(*args, **kwargs)
                if isinstance(value, int) and not isinstance(value, bool):
                    value = str(value)
                if not isinstance(value, str):
                    raise InvalidJobOptions(
                        f"concurrency_key must return a str or int, not {type(value).__name__}"
                    )
            gates.append(concurrency_gate(task_path, self.cap, value))
        return " ".join(gates)


def queue_rate_limits(value: object) -> dict[str, RateLimit]:
    """``OPTIONS["RATE_LIMITS"]``: queue name -> "100/m"; ``InvalidJobOptions`` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidJobOptions('RATE_LIMITS must be a dict of queue name -> "10/s"')
    return {str(q): RateLimit.parse(v, f"RATE_LIMITS[{q!r}]") for q, v in value.items()}
