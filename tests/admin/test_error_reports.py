"""Error reports (the DEBUG 500 page, the admins' error emails) never show a password.

Django hides settings by name, never ``URL``: ``echomq_django.debug``'s filter shows
every URL of the settings as ``mask_url`` does.
"""

from __future__ import annotations

import pytest
from django.test import RequestFactory
from django.views import debug
from django.views.debug import ExceptionReporter

FILTER = "echomq_django.debug.SafeExceptionReporterFilter"
URL = "redis://:s3cr3tPW@127.0.0.1:6421/0?ssl_password=k3yPW"


def report(settings, reporter_filter: str | None) -> str:
    settings.DEBUG = True
    settings.ECHOMQ = {"URL": URL, "QUEUES": ["default"]}
    settings.CACHES = {"default": {"BACKEND": "x", "LOCATION": [URL], "OPTIONS": {}}}
    if reporter_filter:
        settings.DEFAULT_EXCEPTION_REPORTER_FILTER = reporter_filter
    debug.get_default_exception_reporter_filter.cache_clear()  # read once per process
    try:
        raise OverflowError("date value out of range")
    except OverflowError as exc:
        reporter = ExceptionReporter(RequestFactory().get("/"), type(exc), exc, exc.__traceback__)
    return reporter.get_traceback_html() + reporter.get_traceback_text()


@pytest.fixture(autouse=True)
def fresh_filter():
    yield
    debug.get_default_exception_reporter_filter.cache_clear()


def test_djangos_own_filter_shows_the_url_with_its_password(settings):
    assert "s3cr3tPW" in report(
        settings, "django.views.debug.SafeExceptionReporterFilter"
    )  # why it is shipped


@pytest.mark.parametrize("secret", ["s3cr3tPW", "k3yPW"])
def test_the_filter_shows_every_url_of_the_settings_masked(settings, secret):
    shown = report(settings, FILTER)
    assert secret not in shown
    assert "redis://:***@127.0.0.1:6421/0" in shown


def test_the_demo_project_uses_it():
    from project import settings as demo

    assert demo.DEFAULT_EXCEPTION_REPORTER_FILTER == FILTER
