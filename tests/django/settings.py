"""Settings for the Django-layer tests and for the ``runworker`` subprocesses they start.

Same as ``tests.settings``, with the test tasks module loaded by workers and
retries without backoff (the suite stays fast). The server URL comes from
``ECHOMQ_TEST_URL`` (subprocesses) or is overridden per test (conftest).
"""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.django.taskapp"]  # tasks outside tasks.py

TASKS = {
    "default": {
        "BACKEND": "echomq_django.backends.EchoMQBackend",
        "QUEUES": ["default", "emails", "slow"],
        "OPTIONS": {"TASK_MODULES": ["tests.django.tasks"], "BACKOFF": 0, "LEASE": 5},
    }
}
