"""Arguments and return values are stored only as they come back: never deeper than
MAX_NESTING, never with a key lost, never with text UTF-8 cannot hold (review of
Django's Tasks contract, D3-D5)."""

from __future__ import annotations

import json
import sys

import pytest

from echomq_django.engine.jobs import NewJob
from echomq_django.engine.worker import Failure
from echomq_django.exceptions import InvalidTaskArguments, PayloadError
from echomq_django.execution import execute
from echomq_django.payload import MAX_NESTING
from tests.django import tasks
from tests.django.tasks import nested

pytestmark = pytest.mark.django_db
NON_JSON = "echomq_django.execution.NonJSONReturnValue"


def keys_and_values(client) -> dict[bytes, object]:
    return {key: client.type(key) for key in client.scan_iter()}


def refused(client, make, message: str) -> None:
    """``make()`` raises InvalidTaskArguments matching ``message`` and writes nothing."""
    tasks.add.enqueue(0, 0)  # the queue exists: the registry and metrics are written already
    before = keys_and_values(client)
    with pytest.raises(InvalidTaskArguments, match=message):
        make()
    assert keys_and_values(client) == before


def deep_stack(frames: int, read):
    """``read()`` called ``frames`` frames deeper than here (a view under its middleware)."""
    return read() if frames == 0 else deep_stack(frames - 1, read)


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 480, 970, 5000, 20_000])
def test_an_argument_nested_past_the_limit_is_refused_naming_it(echomq, depth):
    refused(
        echomq,
        lambda: tasks.echo.enqueue(1, deep=nested(depth)),
        f"keyword argument 'deep' .*nested more than {MAX_NESTING} deep",
    )


def test_an_argument_at_the_limit_is_stored_and_read_from_a_deep_stack(echomq, jobs):
    result = tasks.echo.enqueue(nested(MAX_NESTING))
    assert result.args == [nested(MAX_NESTING)]
    stored = deep_stack(sys.getrecursionlimit() // 2, lambda: tasks.echo.get_result(result.id))
    assert stored.args == result.args


def planted(jobs, args) -> str:
    body = {"v": 1, "task": tasks.echo.module_path, "args": args, "kwargs": {}}
    payload = json.dumps({**body, "backend": "default"})
    return jobs.enqueue("default", NewJob(payload=payload, task=tasks.echo.module_path)).id


def test_a_stored_row_nested_past_the_limit_reads_as_a_payload_error(echomq, jobs):
    """Stored by an earlier version (or planted): a typed error, not a RecursionError
    whose depth depends on the reader's stack; a worker refuses it, never runs it."""
    job_id = planted(jobs, [nested(MAX_NESTING + 1)])
    with pytest.raises(PayloadError, match="nested more than"):
        deep_stack(30, lambda: tasks.echo.get_result(job_id))
    outcome = execute(jobs.claim("default", "w1").jobs[0])
    assert isinstance(outcome, Failure) and outcome.retry is False
    assert "PayloadError" in outcome.summary


def test_a_return_value_nested_past_the_limit_fails_and_is_not_retried(echomq, jobs):
    tasks.returns_badly.enqueue("deep")  # max_attempts=3
    outcome = execute(jobs.claim("default", "w1").jobs[0])
    assert isinstance(outcome, Failure) and outcome.retry is False
    assert f"nested more than {MAX_NESTING} deep" in outcome.summary
    assert json.loads(outcome.error)["exception_class_path"] == NON_JSON


@pytest.mark.parametrize(
    "value",
    [{1: "a", "1": "b"}, {True: "x", "true": "y"}, {None: 1, "null": 2}, {1.5: 1, "1.5": 2}],
    ids=["int", "bool", "none", "float"],
)
def test_dict_keys_that_json_makes_the_same_are_refused_naming_the_argument(echomq, value):
    """JSON keys are text: reading the row back would keep only the last of them."""
    refused(echomq, lambda: tasks.echo.enqueue(1, [value]), "positional argument 1 .*dict keys")
    refused(echomq, lambda: tasks.echo.enqueue(flags=value), "keyword argument 'flags' .*dict keys")


def test_dict_keys_json_makes_text_are_still_stored_when_none_collide(echomq):
    result = tasks.echo.enqueue({1: "a", "2": "b", False: "c", None: "d"})
    assert tasks.echo.get_result(result.id).args == [
        {"1": "a", "2": "b", "false": "c", "null": "d"}
    ]


def test_a_return_value_whose_keys_collide_fails_and_is_not_retried(echomq, jobs):
    tasks.returns_badly.enqueue("keys")  # max_attempts=3
    outcome = execute(jobs.claim("default", "w1").jobs[0])
    assert isinstance(outcome, Failure) and outcome.retry is False
    assert "dict keys" in outcome.summary
    assert json.loads(outcome.error)["exception_class_path"] == NON_JSON


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: tasks.echo.enqueue("ok", "\ud800"), "positional argument 1 .*lone surrogate"),
        (
            lambda: tasks.echo.enqueue(name={"\udc80": 1}),
            "keyword argument 'name' .*lone surrogate",
        ),
        (lambda: tasks.echo.enqueue(**{"\ud800": 1}), r"keyword argument '\\ud800' .*surrogate"),
    ],
    ids=["value", "dict-key", "keyword-name"],
)
def test_a_lone_surrogate_is_refused_naming_the_argument(echomq, make, message):
    """Not the engine's InvalidJobOptions for the whole payload, at a position in its text."""
    refused(echomq, make, message)


def test_surrogate_pairs_and_other_text_are_stored(echomq):
    result = tasks.echo.enqueue("😀", "\\ud800", émoji="😀 é")
    stored = tasks.echo.get_result(result.id)
    assert (stored.args, stored.kwargs) == (["😀", "\\ud800"], {"émoji": "😀 é"})


@pytest.mark.parametrize("name", [1, None, ("a",), b"a"])
def test_a_keyword_name_that_is_not_text_is_refused_naming_it(echomq, name):
    backend = tasks.echo.get_backend()
    refused(echomq, lambda: backend.enqueue(tasks.echo, [], {name: 1}), "cannot be a name")
