"""Settings of the vtasks worker processes: only that backend's app and TASKS entry."""

from bench.djsettings.base import *  # noqa: F403
from bench.djsettings.base import APPS, BACKENDS

INSTALLED_APPS = [APPS["vtasks"]]
TASKS = {"default": BACKENDS["vtasks"], "vtasks": BACKENDS["vtasks"]}
