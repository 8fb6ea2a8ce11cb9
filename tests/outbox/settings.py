"""Settings of the outbox tests' child processes (relays, runreaper, runworker, the view).

The database is a real one the test made: ``ECHOMQ_TEST_DB`` is a URL
(``sqlite:////tmp/.../outbox.sqlite3`` or ``postgresql://postgres@127.0.0.1:5432/<name>``).
"""

import os

import environ

from tests.settings import *  # noqa: F403

DATABASES = {"default": environ.Env.db_url_config(os.environ["ECHOMQ_TEST_DB"])}
ROOT_URLCONF = "tests.outbox.urls"
TASKS = {
    "default": {
        "BACKEND": "echomq_django.backends.EchoMQBackend",
        "QUEUES": ["default", "emails", "slow"],  # the installed demo app's tasks use them
        "OPTIONS": {
            "ENQUEUE_ON_COMMIT": "outbox",
            "TASK_MODULES": ["tests.outbox.tasks"],
            "BACKOFF": 0,
        },
    }
}
if os.environ.get("ECHOMQ_TEST_OUTBOX_UNSEEN"):
    # No task the discovery can load uses the outbox; one in an app's other module
    # (tests.django.taskapp.jobs.parcel) does.
    INSTALLED_APPS = [*INSTALLED_APPS, "tests.django.taskapp"]  # noqa: F405
    TASKS["default"]["OPTIONS"] = {"ENQUEUE_ON_COMMIT": False, "BACKOFF": 0}
