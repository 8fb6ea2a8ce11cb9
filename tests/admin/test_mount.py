"""``admin.mount`` on a project's own AdminSite: pages and links stay on that site."""

from __future__ import annotations

import pytest
from django.contrib.admin import AdminSite
from django.urls import path

from echomq_django.admin import mount

from . import seed

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]

ops = AdminSite(name="ops")
mount(ops)
mount(ops)  # idempotent
urlpatterns = [path("ops/", ops.urls)]


def test_a_custom_site_serves_the_pages_and_links_to_itself(jobs, superuser):
    (job_id,) = seed.dead(jobs, "emails")
    page = superuser.get("/ops/echomq/queues/emails/dead/").content.decode()
    assert f'href="/ops/echomq/queues/emails/jobs/{job_id}/"' in page
    assert 'action="/ops/echomq/search/"' in page
    retried = superuser.post(f"/ops/echomq/queues/emails/jobs/{job_id}/retry/")
    assert retried["Location"] == f"/ops/echomq/queues/emails/jobs/{job_id}/"
    assert jobs.get("emails", job_id).state == "pending"


def test_anonymous_users_go_to_that_sites_login(jobs, client):
    assert client.get("/ops/echomq/")["Location"].startswith("/ops/login/")
