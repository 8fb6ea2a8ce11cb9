"""Settings for the scale-out subprocesses: ECHOMQ comes whole from the environment.

``ECHOMQ_TEST_SETTINGS`` is the JSON of the ``ECHOMQ`` dict (URL, OPTIONS, CLUSTER),
so a test starts ``manage.py runworker`` on a cluster, a TLS server or an ACL user
exactly as a deployment would configure it.
"""

import json
import os

from tests.settings import *  # noqa: F403

SPREAD = ["emails", "default", "billing"]  # one queue per master of the suite's cluster

ECHOMQ = json.loads(os.environ.get("ECHOMQ_TEST_SETTINGS", "{}")) or ECHOMQ  # noqa: F405
TASKS = {
    "default": {
        "BACKEND": "echomq_django.backends.EchoMQBackend",
        "QUEUES": [*SPREAD, "slow"],  # tests.django.tasks also uses "slow"
        # MAX_ATTEMPTS 2: the tests' "crashed worker" claims a job and lets its lease
        # expire; until a claim that never ran is refunded, that spends an attempt.
        "OPTIONS": {"TASK_MODULES": ["tests.django.tasks"], "BACKOFF": 0, "MAX_ATTEMPTS": 2},
    }
}
