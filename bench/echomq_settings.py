"""Django settings for the EchoMQ benchmark worker: the full user path, nothing else.

The worker is ``python -m django runworker bench --settings bench.echomq_settings``:
the Django Tasks backend encodes each job, runworker claims it, ``execution``
runs it as a Task (signals, TaskResult, close_old_connections), exactly as in a
project. No database is configured: the no-op task touches none.
"""

import os

import django

SECRET_KEY = "bench-only"
USE_TZ = True
INSTALLED_APPS = ["echomq_django"]
if django.VERSION < (6, 0):
    INSTALLED_APPS.append("django_tasks")
DATABASES: dict = {}
ECHOMQ = {"URL": os.environ.get("BENCH_URL", "redis://127.0.0.1:1/0"), "QUEUES": ["bench"]}
TASKS = {
    "default": {
        "BACKEND": "echomq_django.backends.EchoMQBackend",
        "QUEUES": ["bench"],
        "OPTIONS": {"TASK_MODULES": ["bench.tasks.echomq_tasks"]},
    }
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "loggers": {"django.tasks": {"level": "WARNING"}, "django_tasks": {"level": "WARNING"}},
}
