"""How the report reads and prints one run's medians (shared by report.py and targets.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.runner import Results

Labels = dict[str, list[tuple[str, Any]]]  # adapter key -> [(result label, variant)]
Skipped = dict[str, tuple[str, str]]  # adapter key -> (name, why)


def fmt_rate(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def fmt_f(x: float | None, d: int = 1) -> str:
    return "–" if x is None else f"{x:,.{d}f}"


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def best_variant(res: Results, phase: str, labels_for: list[tuple[str, Any]]) -> tuple:
    """(value, label) of the best median among an adapter's variants."""
    best: tuple = (None, None)
    for label, _ in labels_for:
        v = res.med(phase, label)
        if v is not None and (best[0] is None or v > best[0]):
            best = (v, label)
    return best
