"""Fixtures of the property tests: the Django app aimed at the suite's server."""

from __future__ import annotations

import pytest

from echomq_django import conf
from tests.django import settings as django_test_settings


@pytest.fixture
def echomq_app(settings, url, redis_client):
    """Django settings on the test server with the test tasks; yields the raw client."""
    settings.ECHOMQ = {"URL": url, "MAX_PAYLOAD": 4096}
    settings.TASKS = django_test_settings.TASKS
    conf.reset()
    yield redis_client
    conf.reset()
