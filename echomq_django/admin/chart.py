"""Throughput charts as inline SVG geometry, computed on the server.

The admin must work offline and without a CDN, so there is no chart library:
this module turns ``Jobs.throughput`` series into rectangles and labels, and a
template draws them as SVG. Colours come from CSS (the admin's light and dark
themes), never from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.utils import timezone

from ..engine.times import from_ms

Series = Sequence[tuple[int, int, int]]  # (unix minute, completed, failed), oldest first


@dataclass(frozen=True, slots=True)
class Bar:
    """One minute: a completed segment stacked on a failed one (SVG units)."""

    x: float
    width: float
    done_y: float
    done_h: float
    failed_y: float
    failed_h: float
    title: str


@dataclass(frozen=True, slots=True)
class Tick:
    position: float
    label: str
    anchor: str = "middle"  # SVG text-anchor: the last time label ends at the edge


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    plot_left: int
    plot_bottom: int
    bars: list[Bar]
    gridlines: list[Tick]  # position = y
    times: list[Tick]  # position = x
    completed: int
    failed: int
    peak: int


@dataclass(frozen=True, slots=True)
class Sparkline:
    width: int
    height: int
    points: str  # SVG polyline points of completed + failed per minute
    area: str  # the same line closed along the bottom, for a filled area


def merge(series: Iterable[Series]) -> list[tuple[int, int, int]]:
    """Sum per-queue series minute by minute (all come from the same server clock)."""
    totals: dict[int, list[int]] = {}
    for one in series:
        for minute, done, failed in one:
            pair = totals.setdefault(minute, [0, 0])
            pair[0] += done
            pair[1] += failed
    return [(minute, done, failed) for minute, (done, failed) in sorted(totals.items())]


GRID_STEPS = 4
_NICE = (1, 2, 2.5, 3, 4, 5, 6, 8)


def nice_top(peak: int) -> int:
    """The y axis' top: GRID_STEPS times a round step (1, 2, 2.5, 3, 4, 5, 6, 8 × 10^k).

    Round gridline labels with at most ~25% headroom above the peak; 4 for an empty chart.
    """
    wanted, scale = max(peak, 1) / GRID_STEPS, 1
    while True:
        for step in _NICE:
            value = step * scale
            if value >= wanted and float(value).is_integer():  # whole jobs per gridline
                return int(value) * GRID_STEPS
        scale *= 10


def _minute_label(minute: int) -> str:
    moment = from_ms(minute * 60_000)
    assert moment is not None  # a minute of the server clock: always a datetime
    return timezone.localtime(moment).strftime("%H:%M")


def throughput_chart(
    series: Series, *, width: int = 760, height: int = 200, left: int = 44, bottom: int = 22
) -> Chart:
    """Stacked bars (completed over failed) per minute, on a round y scale."""
    peak = max((done + failed for _, done, failed in series), default=0)
    top = nice_top(peak)
    plot_w, plot_h = width - left - 4, height - bottom - 8
    slot = plot_w / max(len(series), 1)
    gap = 1.0 if slot > 4 else 0.0

    def y(value: float) -> float:
        return round(8 + plot_h - plot_h * value / top, 2)

    bars = []
    for i, (minute, done, failed) in enumerate(series):
        x = round(left + i * slot + gap / 2, 2)
        failed_y, done_y = y(failed), y(failed + done)
        bars.append(
            Bar(
                x=x,
                width=round(slot - gap, 2),
                done_y=done_y,
                done_h=round(failed_y - done_y, 2),
                failed_y=failed_y,
                failed_h=round(y(0) - failed_y, 2),
                title=f"{_minute_label(minute)}: {done} completed, {failed} failed",
            )
        )
    gridlines = [
        Tick(y(top * k / GRID_STEPS), f"{top * k // GRID_STEPS:,}") for k in range(GRID_STEPS + 1)
    ]
    every, last = (10 if len(series) > 20 else 1), len(series) - 1
    times = [
        Tick(left + plot_w, _minute_label(minute), "end")
        if i == last
        else Tick(round(left + (i + 0.5) * slot, 2), _minute_label(minute))
        for i, (minute, _, _) in enumerate(series)
        if (last - i) % every == 0
    ]
    return Chart(
        width=width,
        height=height,
        plot_left=left,
        plot_bottom=height - bottom,
        bars=bars,
        gridlines=gridlines,
        times=times,
        completed=sum(done for _, done, _ in series),
        failed=sum(failed for _, _, failed in series),
        peak=peak,
    )


def sparkline(series: Series, *, width: int = 120, height: int = 24) -> Sparkline:
    """A small line of jobs finished per minute, scaled to its own peak."""
    values = [done + failed for _, done, failed in series] or [0]
    top = max(max(values), 1)
    step = width / max(len(values) - 1, 1)
    coords = [
        f"{round(i * step, 1)},{round(height - 1 - (height - 2) * v / top, 1)}"
        for i, v in enumerate(values)
    ]
    points = " ".join(coords)
    return Sparkline(width, height, points, f"0,{height} {points} {width},{height}")
