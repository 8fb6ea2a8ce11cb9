"""A server lost or refusing during a search is the admin's 503 page, never a 500.

The search reads the server through the engine (typed errors), so whatever the
server does mid-search (it goes away, or answers with an error) reaches the
pages' one outage policy.
"""

from __future__ import annotations

import pytest

from echomq_django import conf
from echomq_django.devserver import EmbeddedServer
from echomq_django.engine.keyspace import new_job_id

from . import seed

pytestmark = pytest.mark.django_db

SEARCH = "/admin/echomq/search/"


@pytest.fixture
def own_server(server, settings):
    """A server of this test's own, which the test may stop; settings point at it."""
    own = EmbeddedServer(binary=server.binary).start()
    settings.ECHOMQ = {"URL": own.url, "QUEUES": ["default", "emails"]}
    conf.reset()
    yield own
    conf.reset()
    own.stop()


@pytest.mark.parametrize("wanted", ["id", "task"])
def test_a_server_stopped_before_a_search_is_the_503_page(own_server, superuser, wanted):
    (job_id,) = seed.dead(conf.get_jobs(), "emails")
    query = job_id if wanted == "id" else "demo.tasks.nothing"
    assert superuser.get(f"{SEARCH}?id={query}").status_code == 302  # found, or not: a redirect
    own_server.stop(cleanup=False)
    response = superuser.get(f"{SEARCH}?id={query}")
    assert response.status_code == 503
    assert "cannot be reached" in response.content.decode()


def test_a_server_refusing_the_search_is_the_503_page(server, make_acl_server, settings, superuser):
    # The registry can be read, but not whether a job's key exists: the search's own read
    # is answered with an error (NOPERM).
    acl = make_acl_server("~emq:* +@all -exists", binary=server.binary)
    settings.ECHOMQ = {"URL": acl.url, "QUEUES": ["default", "emails"]}
    conf.reset()
    try:
        response = superuser.get(f"{SEARCH}?id={new_job_id()}")
    finally:
        conf.reset()
    assert response.status_code == 503
    assert "exists" in response.content.decode().lower()
