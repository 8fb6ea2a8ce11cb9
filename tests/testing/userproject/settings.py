"""A user's project, as docs/testing.md sets it up: three ways to enqueue inside atomic()."""

import os

import django

SECRET_KEY = "userproject-not-secret"
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["testserver"]
ROOT_URLCONF = "urls"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "echomq_django", "shop"]
if django.VERSION < (6, 0):
    INSTALLED_APPS.append("django_tasks")
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
if os.environ.get("SHOP_POSTGRESQL_NAME"):  # the same suite on PostgreSQL (test_plugin.py)
    DATABASES["default"] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ["SHOP_POSTGRESQL_NAME"],  # pytest-django makes test_<NAME>
        "USER": "postgres",
        "HOST": "127.0.0.1",
        "PORT": "5432",
    }
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

# The "dev server": the plugin's tests must neither see nor touch the jobs on it.
ECHOMQ = {"URL": os.environ.get("ECHOMQ_URL", "redis://127.0.0.1:1/0")}

BACKEND = "echomq_django.backends.EchoMQBackend"
TASKS = {
    "default": {"BACKEND": BACKEND, "QUEUES": ["default", "mail"]},
    "on_commit": {
        "BACKEND": BACKEND,
        "QUEUES": ["default"],
        "OPTIONS": {"ENQUEUE_ON_COMMIT": True},
    },
    "outbox": {
        "BACKEND": BACKEND,
        "QUEUES": ["default"],
        "OPTIONS": {"ENQUEUE_ON_COMMIT": "outbox"},
    },
}
