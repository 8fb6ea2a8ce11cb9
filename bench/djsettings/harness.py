"""The harness process: EchoMQ as ``default`` plus every django.tasks peer installed here.

A backend whose package is missing (e.g. on Python 3.11, where django-vtasks and
threadmill, Django 6 only, are not installed) is left out; its adapter then says
"not installed".
"""

from importlib.util import find_spec

from bench.djsettings.base import *  # noqa: F403
from bench.djsettings.base import APPS, BACKENDS
from bench.echomq_settings import ECHOMQ
from bench.echomq_settings import INSTALLED_APPS as ECHOMQ_APPS
from bench.echomq_settings import TASKS as ECHOMQ_TASKS

ECHOMQ = ECHOMQ
_present = [k for k, app in APPS.items() if find_spec(app.split(".")[0]) is not None]
INSTALLED_APPS = [*ECHOMQ_APPS, *(APPS[k] for k in _present)]
TASKS = {**ECHOMQ_TASKS, **{k: BACKENDS[k] for k in _present}}
