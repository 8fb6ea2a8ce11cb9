"""The plugin's tests: a dev server's database that the user's suite must never touch."""

import pytest
import redis

from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import Jobs, NewJob

DEV_DB, TEST_DB = 5, 6

# userproject/ is a separate project with tests of its own, run in a subprocess by
# test_plugin.py as a user runs theirs: this suite must not collect them.
collect_ignore = ["userproject"]


@pytest.fixture
def dev_server(valkey_server):
    """A "dev server" db holding a dev worker's pending job, which the tests must not meet."""
    url = valkey_server.url.rsplit("/", 1)[0]
    client = redis.Redis.from_url(f"{url}/{DEV_DB}")
    client.flushdb()
    redis.Redis.from_url(f"{url}/{TEST_DB}").flushdb()
    jobs = Jobs(Connector.from_url(f"{url}/{DEV_DB}"))
    jobs.register_queue("default")
    dev_job = jobs.enqueue("default", NewJob(payload="{}", task="dev.tasks.work"))
    before = sorted(client.keys())
    yield url, dev_job.id
    assert sorted(client.keys()) == before, "the tests wrote to the dev server's database"
    assert jobs.get("default", dev_job.id).state == "pending"
    jobs.connector.close()
