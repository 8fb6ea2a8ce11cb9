"""Django settings for the test suite (pyproject: DJANGO_SETTINGS_MODULE=tests.settings).

The ECHOMQ URL points at a port where nothing listens (never the machine's own Redis):
tests point the app at the suite's own server
(see the ``server`` / ``url`` fixtures in tests/conftest.py).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import django

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = "echomq-tests-not-secret"
DEBUG = False
# As the README asks of a project whose ECHOMQ URL holds a password (echomq.W003).
DEFAULT_EXCEPTION_REPORTER_FILTER = "echomq_django.debug.SafeExceptionReporterFilter"
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "echomq_django",
]
if importlib.util.find_spec("project.demo") is not None:
    INSTALLED_APPS.append("project.demo")
if django.VERSION < (6, 0):  # Django 5.2: the django-tasks backport supplies the framework
    INSTALLED_APPS.append("django_tasks")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
    # A second database: an enqueue inside a transaction on it (tests that ask for it).
    "other": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
STATIC_URL = "/static/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast tests

ECHOMQ = {"URL": os.environ.get("ECHOMQ_TEST_URL", "redis://127.0.0.1:1/0")}

# The backend is only configured once the Django layer exists, so that engine-only
# tests run while echomq_django/backends.py is still being written.
if importlib.util.find_spec("echomq_django.backends") is not None:
    TASKS = {
        "default": {
            "BACKEND": "echomq_django.backends.EchoMQBackend",
            "QUEUES": ["default", "emails", "slow"],
        }
    }
