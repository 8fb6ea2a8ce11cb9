"""``runworker`` / ``runreaper``, the management commands: every test of them is here.

``spawn``, ``valkey_url``, ``valkey_jobs`` and ``echomq`` are shared (tests/support/fixtures.py);
``jobs`` is the Django layer's engine API (tests/django/conftest.py), for test_contract.py.
"""

import pytest

from echomq_django import conf
from tests.django.conftest import jobs  # noqa: F401
from tests.worker import settings as worker_settings


@pytest.fixture
def django_jobs(settings, valkey_url, valkey_jobs):
    """The app pointed at the flushed session Valkey, with the worker tests' TASKS."""
    settings.ECHOMQ = {"URL": valkey_url}
    settings.TASKS = worker_settings.TASKS
    conf.reset()
    yield valkey_jobs
    conf.reset()
