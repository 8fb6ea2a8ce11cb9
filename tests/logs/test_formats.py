"""What a task or a row puts in a log record cannot pass for another record, in either format."""

from __future__ import annotations

import json
import logging
import re
import sys

from echomq_django.engine.error_record import ERROR_TEXT_MAX
from echomq_django.logs import CONTINUATION, JsonFormatter, TextFormatter

FORGED = "2026-12-01T10:51:43.670+00:00 INFO echomq.job[6230] job 0000 shop.pay completed"
HEAD = re.compile(r"^\d{4}-\d\d-\d\dT")


def record(message: str, *, raised: BaseException | None = None) -> logging.LogRecord:
    exc_info = None
    if raised is not None:
        try:
            raise raised
        except BaseException:
            exc_info = sys.exc_info()
    return logging.LogRecord("django.tasks", logging.ERROR, "", 0, message, (), exc_info)


def test_a_text_record_is_one_line_and_each_line_below_it_is_marked():
    text = TextFormatter().format(
        record(f"task failed\n{FORGED}", raised=ValueError(f"kaput\n{FORGED}\r{FORGED}"))
    )
    head, *below = text.split("\n")
    assert HEAD.match(head) and head.endswith("task failed")
    assert below and all(line.startswith(CONTINUATION) for line in below), below
    assert [line for line in text.split("\n") if HEAD.match(line)] == [head]
    assert f"{CONTINUATION}{FORGED}" in below  # the message's own second line, shown, marked
    assert f"{CONTINUATION}ValueError: kaput" in below
    assert f"{CONTINUATION}{FORGED}\\r{FORGED}" in below  # a CR is escaped, not a line


def test_a_text_record_escapes_control_characters_and_surrogates():
    text = TextFormatter().format(record("\x1b[2J\x00 \u202e \ud800 done"))
    assert "\n" not in text
    assert text.endswith("\\x1b[2J\\x00 \\u202e \\ud800 done")


def test_each_text_of_a_record_is_cut_as_a_stored_traceback_is():
    huge = "x" * (10 * ERROR_TEXT_MAX)
    text = TextFormatter().format(record(huge, raised=ValueError(huge)))
    assert len(text) < 3 * ERROR_TEXT_MAX
    assert text.count("characters cut ...]") == 2


def test_a_json_record_is_one_strict_json_line_whatever_its_text():
    """Lone surrogates would come out as ``\\ud800`` escapes, which ``jq`` refuses."""
    item = record(f"lone \ud800 {FORGED}\n", raised=ValueError("bad \udc80 name\n" + "y" * 10**6))
    item.__dict__["job"] = {"task": "shop.\udcff", "args": ["\ud83d"]}  # an extra field
    line = JsonFormatter().format(item)
    assert "\n" not in line
    data = json.loads(line)
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # no surrogate, raw or escaped
    assert data["message"] == f"lone \\ud800 {FORGED}\n"
    assert data["job"] == {"task": "shop.\\udcff", "args": ["\\ud83d"]}
    assert "bad \\udc80 name" in data["exc_info"]
    assert len(data["exc_info"]) < 2 * ERROR_TEXT_MAX
