"""Task arguments through the Django backend: stored exactly, or refused before any write.

``echo.enqueue(*args, **kwargs)`` then ``get_result(id)`` must give back the
arguments the enqueue reported (Django's JSON-normalised form: tuples become
lists); plain JSON values come back identical, big integers included (Lua never
parses a payload). Anything without a JSON form (sets, bytes, NaN, objects,
lone surrogates) raises a typed error and writes nothing.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq_django.compat import InvalidTask, default_task_backend
from echomq_django.engine.errors import InvalidJobOptions, PayloadTooLarge
from tests.chaos import snapshot
from tests.django.tasks import echo

any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=20)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # unbounded: 2**64 and beyond must survive exactly
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
odd_values = st.one_of(
    st.tuples(json_scalars, json_scalars),
    st.dictionaries(st.integers(), json_scalars, max_size=3),
    st.sets(st.integers(), max_size=3),
    st.binary(max_size=5),
    st.just(math.nan),
    st.just(math.inf),
    st.builds(object),
    any_text,
)
values = st.one_of(json_values, odd_values)


def _is_plain_json(value) -> bool:
    if isinstance(value, list):
        return all(_is_plain_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain_json(v) for k, v in value.items())
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return not any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    return value is None or isinstance(value, bool | int)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    args=st.lists(values, max_size=4),
    kwargs=st.dictionaries(st.one_of(st.text(max_size=10), any_text), values, max_size=4),
)
def test_arguments_round_trip_or_are_refused_before_any_write(echomq, args, kwargs):
    raw = echomq
    raw.flushall()
    before = snapshot.dump(raw)
    try:
        result = echo.enqueue(*args, **kwargs)
    except (InvalidTask, InvalidJobOptions) as exc:
        assert isinstance(exc, TypeError | ValueError)
        assert snapshot.dump(raw) == before, "a refused enqueue wrote something"
        assert not (_is_plain_json(args) and _is_plain_json(kwargs) and len(str(args)) < 1000)
        return
    stored = default_task_backend.get_result(result.id)
    assert (stored.args, stored.kwargs) == (result.args, result.kwargs)
    if _is_plain_json(args) and _is_plain_json(kwargs):
        assert (stored.args, stored.kwargs) == (args, kwargs)


def test_the_max_payload_setting_refuses_big_arguments_before_any_write(echomq, settings):
    settings.ECHOMQ = {**settings.ECHOMQ, "MAX_PAYLOAD": 300}  # setting_changed rebuilds Jobs
    before = snapshot.dump(echomq)
    with pytest.raises(PayloadTooLarge, match="over the limit of 300"):
        echo.enqueue("x" * 400)
    assert snapshot.dump(echomq) == before
    assert default_task_backend.get_result(echo.enqueue("x" * 10).id).args == ["x" * 10]
