"""Settings of the djhuey worker processes: only that backend's app and TASKS entry."""

from bench.djsettings.base import *  # noqa: F403
from bench.djsettings.base import APPS, BACKENDS

INSTALLED_APPS = [APPS["djhuey"]]
TASKS = {"default": BACKENDS["djhuey"], "djhuey": BACKENDS["djhuey"]}
