"""Settings for the ``runworker``/``runreaper`` subprocesses of the worker tests.

The server URL comes from ``ECHOMQ_TEST_URL`` (read by ``tests.settings``).
"""

from tests.settings import *  # noqa: F403

TASKS = {
    "default": {
        "BACKEND": "echomq_django.backends.EchoMQBackend",
        "QUEUES": ["default", "emails", "slow"],  # the demo app uses "emails"
        "OPTIONS": {"TASK_MODULES": ["tests.worker.tasks"], "BACKOFF": 0},
    }
}
