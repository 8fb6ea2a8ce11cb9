"""How long a failed job waits before its next attempt: exponential backoff with jitter.

Jitter matters more than the curve: when a dependency goes down, every job that
touched it fails within the same second, and without jitter they would all come
back in the same second too (a thundering herd on the recovering service).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from .bounds import MAX_DELAY_MS
from .validation import check_int


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``base_ms * factor ** (attempt - 1)``, capped at ``max_ms``, then jittered.

    ``jitter`` is the fraction of the delay that is random: 0.5 draws the delay
    uniformly from [d/2, d]; 1.0 is "full jitter" (uniform in [0, d]); 0 is none.
    """

    base_ms: int = 1_000
    factor: float = 2.0
    max_ms: int = 10 * 60 * 1000
    jitter: float = 0.5

    def __post_init__(self) -> None:
        check_int(self.base_ms, 0, MAX_DELAY_MS, "base_ms", ValueError)
        check_int(self.max_ms, 0, MAX_DELAY_MS, "max_ms", ValueError)
        if not isinstance(self.factor, (int, float)) or self.factor < 1:
            raise ValueError(f"factor must be a number >= 1, not {self.factor!r}")
        if not isinstance(self.jitter, (int, float)) or not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, not {self.jitter!r}")

    def backoff_ms(self, attempt: int, rng: random.Random | None = None) -> int:
        """The delay after failed attempt number ``attempt`` (1 for the first failure)."""
        exponent = max(0, attempt - 1)
        ceiling = float(self.max_ms)
        # Clamp the exponent first: factor ** 10_000 overflows a float.
        if self.factor > 1 and self.base_ms > 0:
            exponent = min(exponent, math.ceil(math.log(ceiling / self.base_ms + 1, self.factor)))
        delay = min(self.base_ms * self.factor**exponent, ceiling)
        low = delay * (1 - self.jitter)
        return int((rng or random).uniform(low, delay))
