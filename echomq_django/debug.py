"""An exception reporter filter that hides the passwords of URLs in the settings.

Django's ``SafeExceptionReporterFilter`` hides a setting by its name (``API``,
``TOKEN``, ``KEY``, ``SECRET``, ``PASS``, ``SIGNATURE``), never ``URL``: the DEBUG
500 page and the error emails of ``AdminEmailHandler`` (sent with DEBUG off too)
showed ``ECHOMQ["URL"]`` with its password, as they show ``CACHES``' Redis
``LOCATION``. This filter also shows every URL in the settings, at any depth, as
``mask_url`` does (a password or a secret parameter as ``***``)::

    DEFAULT_EXCEPTION_REPORTER_FILTER = "echomq_django.debug.SafeExceptionReporterFilter"
"""

from __future__ import annotations

import re
from typing import Any

from django.views import debug

from .engine.url import mask_url

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


class SafeExceptionReporterFilter(debug.SafeExceptionReporterFilter):
    """Django's filter, with every URL of the settings shown without its secrets."""

    def cleanse_setting(self, key: Any, value: Any) -> Any:
        cleansed = super().cleanse_setting(key, value)  # dicts, lists: item by item, here
        if isinstance(cleansed, str) and _URL.match(cleansed):
            return mask_url(cleansed)
        return cleansed
