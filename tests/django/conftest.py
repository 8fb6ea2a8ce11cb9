"""Django-layer fixtures: the engine API of the app pointed at the suite's real server.

``echomq`` (the settings aimed at that server, the test TASKS loaded) is shared:
tests/support/fixtures.py.
"""

from __future__ import annotations

import pytest

from echomq_django import conf


@pytest.fixture
def jobs(echomq):
    return conf.get_jobs()
