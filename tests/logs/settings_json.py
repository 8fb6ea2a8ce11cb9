"""tests.django.settings with the JSON log format (runworker subprocesses of tests/logs)."""

from tests.django.settings import *  # noqa: F403
from tests.django.settings import ECHOMQ

ECHOMQ = {**ECHOMQ, "LOG_FORMAT": "json"}
