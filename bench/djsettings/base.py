"""What every bench settings module shares, and each backend's TASKS entry."""

from __future__ import annotations

import os

URL = os.environ.get("BENCH_URL", "redis://127.0.0.1:1/0")
QUEUE = "bench"

SECRET_KEY = "bench-only"
USE_TZ = True
# A real (in-memory) database: django-vtasks enqueues through transaction.on_commit,
# which needs one, as it would in a project.
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "loggers": {
        name: {"level": "WARNING"}
        for name in ("django.tasks", "django_vtasks", "threadmill", "huey")
    },
}

# The alias of each backend is its adapter key (bench/adapters/<key>.py).
BACKENDS: dict[str, dict] = {
    "vtasks": {
        "BACKEND": "django_vtasks.backends.valkey.ValkeyTaskBackend",
        "QUEUES": [QUEUE],
        "OPTIONS": {"BROKER_URL": URL},
    },
    "threadmill": {
        "BACKEND": "threadmill.backends.redis.RedisTaskBackend",
        "QUEUES": [QUEUE],
        "REDIS_URL": URL,
    },
    "djhuey": {
        "BACKEND": "huey.contrib.djhuey.tasks_backend.HueyBackend",
        "QUEUES": [QUEUE],
    },
}
APPS = {"vtasks": "django_vtasks", "threadmill": "threadmill", "djhuey": "huey.contrib.djhuey"}

# django-vtasks: the bench queue, its alias, no scheduler.
VTASKS_QUEUES = [QUEUE]
VTASKS_BACKEND = "vtasks"
VTASKS_RUN_SCHEDULER = False
# Huey's own django.tasks backend keeps its records as Huey results (on by default).
HUEY = {"name": "bench-djhuey", "immediate": False, "connection": {"url": URL}}
