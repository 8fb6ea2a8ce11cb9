"""The error record of a failure is built once: the JSON the row keeps and its parts."""

from __future__ import annotations

import json

from echomq_django.engine import validation
from echomq_django.engine.error_record import ERROR_TEXT_MAX, ErrorRecord
from echomq_django.engine.events import failure_traceback
from echomq_django.engine.outcome import error_object, failure_from_exception


def failure_of(exc: BaseException):
    try:
        raise exc
    except BaseException as raised:
        return failure_from_exception(raised)


def test_the_record_is_the_json_the_row_keeps_and_keeps_its_parts():
    failure = failure_of(ValueError("boom \udcff" + "x" * (2 * ERROR_TEXT_MAX)))
    record = failure.error
    assert isinstance(record, ErrorRecord)
    parsed = json.loads(record)
    assert parsed == {"exception_class_path": "builtins.ValueError", "traceback": record.traceback}
    assert record.class_path == "builtins.ValueError"
    assert "ValueError: boom \\udcff" in record.traceback  # storable: the surrogate escaped
    assert len(record.traceback) <= ERROR_TEXT_MAX + 100  # bounded: head and tail kept
    record.encode("utf-8")


def test_the_engine_reads_its_own_record_without_parsing_it_again():
    record = failure_of(KeyError("k")).error
    assert error_object(record, "KeyError: 'k'") is record
    assert validation.error_object(record) is record
    assert failure_traceback(record) == record.traceback.rstrip("\n")
    # The same text from elsewhere (a child process's reply) is read by parsing it.
    foreign = str(record)
    assert type(foreign) is str
    assert error_object(foreign, "KeyError: 'k'") == record
    assert validation.error_object(foreign) == record
    assert failure_traceback(foreign) == failure_traceback(record)


def test_a_caller_built_record_is_used_as_is():
    exc = RuntimeError("once")
    record = ErrorRecord.of(exc)
    assert failure_from_exception(exc, record).error is record
