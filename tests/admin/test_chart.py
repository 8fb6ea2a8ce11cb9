"""The server-side chart geometry and the relative-time filter (no server needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from echomq_django.admin.chart import merge, nice_top, sparkline, throughput_chart
from echomq_django.templatetags.echomq_admin import ago, last_line


@pytest.mark.parametrize(
    "peak, top", [(0, 4), (1, 4), (5, 8), (10, 12), (203, 240), (999, 1000), (1234, 1600)]
)
def test_the_axis_top_is_round_and_close_to_the_peak(peak, top):
    assert nice_top(peak) == top
    assert top >= peak and top % 4 == 0


def test_bars_stack_completed_on_failed_in_proportion():
    series = [
        (1000 + i, done, failed) for i, (done, failed) in enumerate([(0, 0), (6, 2), (12, 0)])
    ]
    chart = throughput_chart(series, width=300, height=120)
    empty, mixed, full = chart.bars
    assert empty.done_h == empty.failed_h == 0
    assert mixed.failed_h == pytest.approx(full.done_h * 2 / 12, abs=0.02)
    assert mixed.done_h == pytest.approx(full.done_h * 6 / 12, abs=0.02)
    assert mixed.done_y + mixed.done_h == pytest.approx(mixed.failed_y)  # stacked, no gap
    assert (chart.completed, chart.failed, chart.peak) == (18, 2, 12)
    assert [t.label for t in chart.gridlines] == ["0", "3", "6", "9", "12"]
    assert chart.times[-1].anchor == "end"  # the last label stays inside the chart
    assert all(b.x + b.width <= chart.width for b in chart.bars)


def test_an_hour_gets_a_time_label_every_ten_minutes():
    chart = throughput_chart([(29_000_000 + i, 1, 0) for i in range(60)])
    assert len(chart.bars) == 60 and len(chart.times) == 6


def test_merge_sums_queues_minute_by_minute():
    assert merge([[(1, 2, 0), (2, 1, 1)], [(1, 3, 1), (2, 0, 0)]]) == [(1, 5, 1), (2, 1, 1)]


def test_sparkline_spans_its_box():
    line = sparkline([(i, i, 0) for i in range(5)], width=100, height=20)
    points = [tuple(map(float, p.split(","))) for p in line.points.split()]
    assert points[0] == (0.0, 19.0) and points[-1] == (100.0, 1.0)
    assert line.area.startswith("0,20 ") and line.area.endswith(" 100,20")


NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "delta, text",
    [
        (timedelta(0), "just now"),
        (timedelta(seconds=12), "12 s ago"),
        (timedelta(minutes=4, seconds=5), "4 min 5 s ago"),
        (timedelta(hours=3, minutes=12, seconds=9), "3 h 12 min ago"),
        (timedelta(days=2, hours=1), "2 d 1 h ago"),
        (-timedelta(minutes=10), "in 10 min"),
    ],
)
def test_ago(delta, text):
    assert ago(NOW - delta, NOW) == text


def test_last_line_of_a_traceback():
    assert last_line("Traceback:\n  File x\nValueError: boom\n\n") == "ValueError: boom"
    assert last_line("") == "" and last_line(None) == ""
