"""``echomq tail`` over stream entries planted on the server: a corrupt entry is left out,
the healthy entries after it are printed, and the tail never dies with a traceback."""

from __future__ import annotations

import signal

import pytest

from echomq_django.engine import events
from echomq_django.engine.keyspace import QueueKeys
from tests.cli.test_tail import Tail
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db
KEY = QueueKeys.of("default").events
GOOD = {"fields": "outcome,job_id,task", "events": '[["completed","good-id","t"]]'}
DEEP = "[" * 100_000 + "]" * 100_000


def planted(name: str, events: str, *extra: str, fields: str = "outcome,job_id,task") -> object:
    return pytest.param({"fields": fields, "events": events}, extra, id=name)


PLANTED = [
    planted("nested-100000-deep", DEEP, fields="outcome,job_id"),
    planted("a-list-as-outcome", '[[["x"], "id", "t"]]'),
    planted("a-list-as-task", '[["failed", "id", ["t"]]]', "--task", "t"),
    planted("null-and-an-object", '[[null, "id", {"a": 1}]]', "--json"),
    planted("events-that-are-not-lists", '[7, "y", null, {}]'),
    planted("an-object", '{"not": "a list"}'),
]


@pytest.mark.parametrize("entry, extra", PLANTED)
def test_a_corrupt_entry_is_left_out_and_the_next_one_is_printed(
    echomq, redis_client, tmp_path, entry, extra
):
    redis_client.xadd(KEY, entry)
    redis_client.xadd(KEY, GOOD)
    tail = Tail(echomq, tmp_path, "--since", "60", "--queue", "default", *extra)
    wait_until(lambda: any("good-id" in line for line in tail.lines()), timeout=30)
    assert tail.stop(signal.SIGTERM) == 0
    assert "Traceback" not in tail.err.read_text()
    assert [line for line in tail.lines() if "good-id" not in line] == []  # nothing else shown


def test_an_event_is_read_as_text_whatever_json_it_holds():
    names = "outcome,job_id,task,attempt,duration_ms"
    batch = '[["ok", 5, null, "2", 1.5], ["x", ["id"], "t", 1, 1], "junk", '
    batch += '["ok", "b", "t", "lots", 1e400]]'
    found = events._entry_events("default", "1-0", {"fields": names, "events": batch})
    assert [e.fields for e in found] == [
        {"outcome": "ok", "job_id": "5", "task": "", "attempt": "2", "duration_ms": "1.5"},
        {"outcome": "ok", "job_id": "b", "task": "t", "attempt": "lots", "duration_ms": "inf"},
    ]
    assert [e.index for e in found] == [0, 3]
    shown = found[1].as_dict()
    assert (shown["attempt"], shown["duration_ms"]) == (0, 0)  # unreadable numbers read as 0
