"""Django settings of the chaos soak's worker and reaper processes (``bench/soak.py``).

The driver passes everything through the environment: ``SOAK_URL`` (its own
server), ``SOAK_LEASE_S`` (the jobs' lease) and ``SOAK_LOG_DIR`` (side logs).
"""

from __future__ import annotations

import os

import django

SECRET_KEY = "echomq-soak-not-secret"
USE_TZ = True
INSTALLED_APPS = ["echomq_django"]
if django.VERSION < (6, 0):  # Django 5.2: the django-tasks backport
    INSTALLED_APPS.append("django_tasks")
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}

QUEUE = "soak"
ECHOMQ = {"URL": os.environ.get("SOAK_URL", "redis://127.0.0.1:1/0"), "QUEUES": [QUEUE]}
TASKS = {
    "default": {
        "BACKEND": "echomq_django.backends.EchoMQBackend",
        "QUEUES": [QUEUE],
        "OPTIONS": {
            "TASK_MODULES": ["bench.soak_tasks"],
            "MAX_ATTEMPTS": int(os.environ.get("SOAK_MAX_ATTEMPTS", "5")),
            "LEASE": float(os.environ.get("SOAK_LEASE_S", "1.0")),
            "BACKOFF": 0.05,
        },
    }
}
