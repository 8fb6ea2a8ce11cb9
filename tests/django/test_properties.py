"""Round trips that must hold for any input: what enqueue stores, get_result gives back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.django import tasks

pytestmark = pytest.mark.django_db
EXAMPLES = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)  # beyond 2**53: the payload is opaque to Lua
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@EXAMPLES
@given(
    args=st.lists(json_values, max_size=4),
    kwargs=st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), json_values, max_size=3),
)
def test_arguments_round_trip_exactly(echomq, args, kwargs):
    result = tasks.echo.enqueue(*args, **kwargs)
    stored = tasks.echo.get_result(result.id)
    assert (stored.args, stored.kwargs) == (result.args, result.kwargs)
    assert json.dumps(stored.args) == json.dumps(args)


@EXAMPLES
@given(
    moment=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1)),
    offset_minutes=st.integers(min_value=-23 * 60, max_value=23 * 60),
    priority=st.integers(min_value=-100, max_value=100),
)
def test_the_rebuilt_task_equals_the_enqueued_one(echomq, moment, offset_minutes, priority):
    run_after = moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
    task = tasks.add.using(run_after=run_after, priority=priority, queue_name="slow")
    stored = tasks.add.get_result(task.enqueue(1, 2).id)
    assert stored.task == task
    assert stored.task.run_after.utcoffset() == run_after.utcoffset()
    assert stored.task.run_after.astimezone(UTC) == run_after.astimezone(UTC)
