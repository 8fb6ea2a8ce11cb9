"""Settings of the example project, read from the environment with django-environ.

Environment (or a ``.env`` file at the repository root):

    SECRET_KEY     default: a development-only key (set it anywhere real)
    DEBUG          default: True
    ALLOWED_HOSTS  default: 127.0.0.1,localhost
    DATABASE_URL   default: sqlite:///var/db.sqlite3
    ECHOMQ_URL     default: redis://127.0.0.1:6390/0 (the server scripts/run starts)
    ECHOMQ_METRICS_TOKEN  default: none (the Prometheus endpoint is then staff-only)
    ECHOMQ_LOG_LEVEL      default: INFO
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import django
import environ

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

env = environ.Env(
    DEBUG=(bool, True),
    ALLOWED_HOSTS=(list, ["127.0.0.1", "localhost"]),
)
environ.Env.read_env(BASE_DIR / ".env")

SECRET_KEY = env("SECRET_KEY", default="django-insecure-echomq-example-only-for-development")
DEBUG = env("DEBUG")
ALLOWED_HOSTS = env("ALLOWED_HOSTS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "echomq_django",
    "project.demo",
]
if django.VERSION < (6, 0):  # Django 5.2 on Python 3.11: the django-tasks backport
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
WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "project" / "templates"],
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

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# The DEBUG page and error emails show the settings: hide ECHOMQ["URL"]'s password too.
DEFAULT_EXCEPTION_REPORTER_FILTER = "echomq_django.debug.SafeExceptionReporterFilter"
ECHOMQ = {
    "URL": env("ECHOMQ_URL", default="redis://127.0.0.1:6390/0"),
    "QUEUES": ["default", "emails", "slow"],
    # Prometheus scrapes /metrics/echomq with "Authorization: Bearer <token>" (staff users need none).
    "METRICS_TOKEN": env("ECHOMQ_METRICS_TOKEN", default=None),
    # Periodic jobs, fired by the reaper (each tick once, however many reapers run);
    # see them at /admin/echomq/schedules/.
    "SCHEDULES": {
        "heartbeat": {"task": "project.demo.tasks.heartbeat", "every": timedelta(minutes=1)},
        "nightly-sum": {
            "task": "project.demo.tasks.add",
            "cron": "0 3 * * *",
            "timezone": "Europe/Paris",
            "args": [40, 2],
        },
    },
}

TASKS = {
    "default": {
        "BACKEND": "echomq_django.backends.EchoMQBackend",
        "QUEUES": ["default", "emails", "slow"],
        "OPTIONS": {"ENQUEUE_ON_COMMIT": True},
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # One timestamp format for Django's lines (runserver) and EchoMQ's.
    "formatters": {"echomq": {"()": "echomq_django.logs.TextFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "echomq"}},
    "loggers": {
        "echomq": {"handlers": ["console"], "level": env("ECHOMQ_LOG_LEVEL", default="INFO")},
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # The worker logs one line per job; Django's own INFO lines for the task_started and
        # task_finished signals (shown when DEBUG is on) would add two more. Failures still show.
        "django.tasks": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}
