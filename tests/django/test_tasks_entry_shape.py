"""A TASKS entry of the wrong shape (QUEUES a string, OPTIONS not a dict) is a check
error, raised on enqueue, as a bad value inside it is: never a crash of the import of
a tasks module or of ``manage.py check``, never a string read letter by letter."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from echomq_django.compat import task_backends
from tests.django import tasks

BACKEND = "echomq_django.backends.EchoMQBackend"


@pytest.mark.parametrize(
    ("entry", "check_id", "message"),
    [
        ({"QUEUES": "default"}, "echomq.E005", "QUEUES'] must be a list of queue names, not str"),
        ({"OPTIONS": None}, "echomq.E004", "OPTIONS'] must be a dict, not NoneType"),
        ({"OPTIONS": ["LEASE", 5]}, "echomq.E004", "OPTIONS'] must be a dict, not list"),
    ],
    ids=["queues-str", "options-none", "options-list"],
)
def test_an_entry_of_the_wrong_shape_is_a_check_error_and_refuses_enqueue(
    settings, redis_client, entry, check_id, message
):
    settings.TASKS = {"default": {"BACKEND": BACKEND, **entry}}
    backend = task_backends["default"]
    [problem] = backend.check()
    assert problem.id == check_id and message in problem.msg
    with pytest.raises(ImproperlyConfigured, match="must be a"):
        backend.enqueue(tasks.add, (1, 2), {})
    assert redis_client.dbsize() == 0
