"""Admin fixtures: the Django app pointed at the suite's real server, and users.

``jobs`` points ``settings.ECHOMQ`` at the session server (``url``, flushed by
``redis_client``) and returns the process's engine API, the one the views use.
Users cover the permission matrix: anonymous, staff without permission, staff
with view only, operators with change or delete, and a superuser.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from echomq_django import conf
from echomq_django.engine.jobs import Jobs

CONFIGURED = ["default", "emails"]


@pytest.fixture
def jobs(settings, url, redis_client) -> Iterator[Jobs]:
    settings.ECHOMQ = {"URL": url, "QUEUES": CONFIGURED}
    conf.reset()
    yield conf.get_jobs()
    conf.reset()


def _client(django_user_model, name: str, *perms: str, superuser: bool = False) -> Client:
    if superuser:
        user = django_user_model.objects.create_superuser(name, f"{name}@example.com", "pw")
    else:
        user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
        for codename in perms:
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label="echomq", codename=codename)
            )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def superuser(django_user_model) -> Client:
    return _client(django_user_model, "root", superuser=True)


@pytest.fixture
def staff(django_user_model) -> Client:
    """Staff, but no EchoMQ permission at all."""
    return _client(django_user_model, "staff")


@pytest.fixture
def viewer(django_user_model) -> Client:
    return _client(django_user_model, "viewer", "view_queue")


@pytest.fixture
def changer(django_user_model) -> Client:
    return _client(django_user_model, "changer", "view_queue", "change_queue")


@pytest.fixture
def deleter(django_user_model) -> Client:
    return _client(django_user_model, "deleter", "view_queue", "delete_queue")


@pytest.fixture
def users(client, staff, viewer, changer, deleter, superuser) -> dict[str, Client]:
    return {
        "anonymous": client,
        "staff": staff,
        "viewer": viewer,
        "changer": changer,
        "deleter": deleter,
        "superuser": superuser,
    }
