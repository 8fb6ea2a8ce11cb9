"""Django-layer fixtures: the app pointed at the suite's real server, test tasks loaded."""

from __future__ import annotations

import pytest

from echomq_django import conf
from tests.django import settings as test_settings


@pytest.fixture
def echomq(settings, url, redis_client):
    """The Django settings aimed at the test server (flushed), with the test TASKS."""
    settings.ECHOMQ = {"URL": url}
    settings.TASKS = test_settings.TASKS
    conf.reset()
    yield redis_client
    conf.reset()


@pytest.fixture
def jobs(echomq):
    return conf.get_jobs()
