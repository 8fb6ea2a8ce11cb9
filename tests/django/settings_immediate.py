"""A project's test settings that switch the task backend to Django's ImmediateBackend."""

from echomq_django.compat import IMMEDIATE_BACKEND
from tests.django.settings import *  # noqa: F403

TASKS = {"default": {"BACKEND": IMMEDIATE_BACKEND, "QUEUES": ["default", "emails", "slow"]}}
