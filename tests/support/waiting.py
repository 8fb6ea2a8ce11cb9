"""Awaiting a condition: the tests poll for it with a deadline, never sleep a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 10.0, step: float = 0.005) -> T:
    """Poll ``predicate`` until it is truthy and return its value; fail the test after
    ``timeout`` seconds. The step is short: some tests time pick-ups with it."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        time.sleep(step)
