"""A row read field by field: ``Job.from_values`` unpacks ``ROW_FIELDS`` by position and
builds a ``Job`` by position, so each field must land where its name says."""

from __future__ import annotations

import dataclasses

import pytest

from echomq_django.engine.errors import CorruptRow
from echomq_django.engine.rows import INT_FIELDS, ROW_FIELDS, Job

# Row field -> Job attribute, where the names differ.
RENAMED = {"idem": "idempotency_key", "run": "started"}


def test_every_field_lands_on_the_attribute_of_its_name():
    values = [f"t-{name}" for name in ROW_FIELDS]
    for n, name in enumerate(ROW_FIELDS):
        if name in INT_FIELDS:
            values[n] = str(1000 + n)
    values[ROW_FIELDS.index("state")] = "active"
    values[ROW_FIELDS.index("solo")] = "1"
    values[ROW_FIELDS.index("run")] = values[ROW_FIELDS.index("attempts")]  # this lease's run
    job = Job.from_values("q", values)
    for n, name in enumerate(ROW_FIELDS):
        got = getattr(job, RENAMED.get(name, name))
        if name == "worker_ids":
            assert got == (values[n],)
        elif name in ("solo", "run"):
            assert got is True
        elif name in INT_FIELDS:
            assert got == int(values[n]), name
        else:
            assert got == values[n], name
    assert job.queue == "q"
    named = {RENAMED.get(n, n) for n in ROW_FIELDS} | {"queue"}
    assert {f.name for f in dataclasses.fields(Job)} == named  # no attribute left unread


def test_a_field_that_is_not_an_integer_is_named():
    values = [None] * len(ROW_FIELDS)
    values[:3] = ["id", "active", "{}"]
    values[ROW_FIELDS.index("crashes")] = "many"
    with pytest.raises(CorruptRow, match="'crashes' is not an integer"):
        Job.from_values("q", values)
