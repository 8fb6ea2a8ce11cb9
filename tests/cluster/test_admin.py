"""The admin on a real 3-master Valkey Cluster: every read and action is single-slot."""

from __future__ import annotations

import pytest

from echomq_django import conf
from echomq_django.engine.keyspace import QueueKeys
from tests.admin import seed

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster_jobs(settings, valkey_cluster, cluster_client):
    host, port = valkey_cluster.startup_nodes[0]
    settings.ECHOMQ = {"URL": f"redis+cluster://{host}:{port}/0", "QUEUES": ["default"]}
    conf.reset()
    yield conf.get_jobs()
    conf.reset()


def test_pages_search_and_actions_on_a_cluster(cluster_jobs, cluster_client, superuser):
    jobs = cluster_jobs
    queues = ["emails", "payments", "reports"]
    nodes = {cluster_client.get_node_from_key(QueueKeys.of(q).dead).name for q in queues}
    assert len(nodes) > 1  # the queues live on different masters
    dead = {queue: seed.dead(jobs, queue)[0] for queue in queues}
    seed.add_worker(jobs, "web-1.shop:1", queues, 4, 1)

    dashboard = superuser.get("/admin/echomq/")
    assert [q.name for q in dashboard.context["queues"]] == ["default", *queues]
    assert "web-1.shop:1" in dashboard.content.decode()
    for queue, job_id in dead.items():
        found = superuser.get(f"/admin/echomq/search/?id={job_id}")
        assert found["Location"] == f"/admin/echomq/queues/{queue}/jobs/{job_id}/"
        assert superuser.get(found["Location"]).status_code == 200
        listing = superuser.get(f"/admin/echomq/queues/{queue}/dead/")
        assert [r.id for r in listing.context["rows"]] == [job_id]
        superuser.post(f"/admin/echomq/queues/{queue}/jobs/{job_id}/retry/")
        assert jobs.get(queue, job_id).state == "pending"
