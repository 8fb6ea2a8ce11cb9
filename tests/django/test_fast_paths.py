"""The per-job shortcuts give what the long way gives: values, errors, times, validation."""

from __future__ import annotations

import json
from collections import OrderedDict
from datetime import datetime, timedelta
from enum import IntEnum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echomq_django.compat import InvalidTask
from echomq_django.engine.jobs import Job
from echomq_django.engine.times import EPOCH
from echomq_django.exceptions import PayloadError
from echomq_django.payload import Payload, check_fields, encode_arguments, encode_each
from echomq_django.results import task_result
from tests.django import tasks

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4) | st.integers(), inner, max_size=3)
    ),
    max_leaves=10,
)


class Size(IntEnum):
    BIG = 3


@settings(max_examples=200, deadline=None)
@given(
    args=st.lists(json_values, max_size=3),
    kwargs=st.dictionaries(st.text(max_size=5), json_values, max_size=3),
)
def test_one_pass_encoding_equals_encoding_each_value(args, kwargs):
    assert outcome(encode_arguments, args, kwargs) == outcome(encode_each, args, kwargs)


def outcome(encode, args, kwargs):
    """The encoded values, or the error's type and message."""
    try:
        return encode(args, kwargs)
    except Exception as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize(
    "value",
    [b"bytes", OrderedDict(a=(1, 2)), range(3), Size.BIG, {1: "int key", "x": [b"y"]}],
    ids=["bytes", "ordered-dict", "range", "int-enum", "nested-bytes"],
)
def test_values_only_normalize_json_takes_are_encoded_the_same(value):
    assert outcome(encode_arguments, [value], {"k": value}) == encode_each([value], {"k": value})


def test_a_bad_argument_is_still_named():
    with pytest.raises(InvalidTask, match="keyword argument 'b'"):
        encode_arguments([1], {"a": 2, "b": {3}})


BAD_PAYLOADS = [
    {"task": 1},
    {"args": {}},
    {"kwargs": []},
    {"backend": None},
    {"takes_context": 1},
    {"idempotency_key": 5},
    {"task": ""},
    {"backend": ""},
    {"args": "x", "kwargs": "y"},  # the first wrong field is named
]


@pytest.mark.parametrize(
    "change", BAD_PAYLOADS, ids=lambda c: ",".join(f"{k}={v!r}" for k, v in c.items())
)
def test_a_bad_payload_gets_the_field_by_field_message(change):
    data = {"v": 1, "task": "a.b", "args": [], "kwargs": {}, "backend": "default", **change}
    with pytest.raises(PayloadError) as expected:
        check_fields(data)
    with pytest.raises(PayloadError) as raised:
        Payload.loads(json.dumps(data))
    assert str(raised.value) == str(expected.value)


def test_a_minimal_payload_gets_the_defaults():
    loaded = Payload.loads('{"v": 1, "task": "a.b", "backend": "default"}')
    assert loaded == Payload(task="a.b", args=[], kwargs={}, backend="default")


def row(**fields: str) -> Job:
    base = {"id": "01900000-0000-7000-8000-000000000001", "state": "active", "payload": ""}
    return Job.from_row("default", {**base, **fields})


@settings(max_examples=100, deadline=None)
@given(
    us=st.integers(min_value=0, max_value=2**52), later=st.integers(min_value=0, max_value=10**9)
)
def test_row_times_are_exact_to_the_microsecond(us, later):
    job = row(enqueued_at=str(us), started_at=str(us), last_attempted_at=str(us + later))
    payload = Payload(task=tasks.add.module_path, args=[], kwargs={}, backend="default")
    result = task_result(job, payload, tasks.add)
    assert result.enqueued_at == result.started_at == EPOCH + timedelta(microseconds=us)
    assert result.last_attempted_at == EPOCH + timedelta(microseconds=us + later)
    assert result.finished_at is None and result.errors == []


def test_a_remembered_valid_task_is_checked_again_when_use_tz_changes(settings, echomq):
    settings.USE_TZ = False
    task = tasks.add.using(run_after=datetime(2099, 1, 1))  # naive: fine without USE_TZ
    backend = task.get_backend()
    backend.validate_task(task)
    settings.USE_TZ = True
    with pytest.raises(InvalidTask, match="aware"):
        backend.validate_task(task)


@settings(max_examples=200, deadline=None)
@given(
    args=st.lists(json_values, max_size=3),
    kwargs=st.dictionaries(st.text(max_size=5), json_values, max_size=3),
    takes_context=st.booleans(),
    key=st.none() | st.text(max_size=8),
    metadata=st.none() | st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
)
def test_the_payload_template_writes_what_encoding_the_whole_object_writes(
    args, kwargs, takes_context, key, metadata
):
    from echomq_django.payload import PAYLOAD_ENCODER

    try:
        args, kwargs = encode_arguments(args, kwargs)
    except InvalidTask:
        return
    whole = {"v": 1, "task": "a.b", "args": args, "kwargs": kwargs, "backend": "default"}
    whole["takes_context"] = takes_context
    if key is not None:
        whole["idempotency_key"] = key
    if metadata:
        whole["metadata"] = metadata
    payload = Payload("a.b", args, kwargs, "default", takes_context, key, metadata)
    assert payload.dumps() == PAYLOAD_ENCODER.encode(whole)


def test_a_task_is_planned_once_and_planned_again_when_use_tz_changes(settings, echomq):
    backend = tasks.add.get_backend()
    settings.USE_TZ = True
    plan = backend.plan_for(tasks.add)
    assert backend.plan_for(tasks.add) is plan
    first, second = tasks.add.enqueue(1, 2), tasks.add.enqueue(3, 4)
    assert first.id != second.id and backend.plan_for(tasks.add) is plan
    assert tasks.add.get_result(second.id).args == [3, 4]
    settings.USE_TZ = False
    assert backend.plan_for(tasks.add) is not plan
