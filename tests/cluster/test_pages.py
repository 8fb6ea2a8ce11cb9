"""The admin pages and the Prometheus endpoint read a cluster like one server:
queues on three masters, the registry of queues and workers outside their slots."""

from __future__ import annotations

import pytest
from django.urls import reverse

from echomq_django import conf
from tests.django import tasks
from tests.support import deployed_settings
from tests.support.cluster import SPREAD

pytestmark = pytest.mark.django_db
TOKEN = "scrape-token-for-the-cluster"


@pytest.fixture
def on_cluster(settings, cluster_url, cluster_client):
    settings.ECHOMQ = {"URL": cluster_url, "METRICS_TOKEN": TOKEN}
    settings.TASKS = deployed_settings.TASKS
    conf.reset()
    yield [tasks.add.using(queue_name=q).enqueue(1, 2) for q in SPREAD]
    conf.reset()


def test_dashboard_lists_and_job_pages_on_the_cluster(admin_client, on_cluster):
    dashboard = admin_client.get(reverse("admin:echomq_dashboard"))
    assert dashboard.status_code == 200
    assert all(q.encode() in dashboard.content for q in SPREAD)
    for result in on_cluster:
        queue = result.task.queue_name
        listing = admin_client.get(reverse("admin:echomq_list", args=[queue, "pending"]))
        assert listing.status_code == 200 and result.id.encode() in listing.content
        detail = admin_client.get(reverse("admin:echomq_job", args=[queue, result.id]))
        assert detail.status_code == 200


def test_prometheus_endpoint_on_the_cluster(client, on_cluster):
    response = client.get(reverse("echomq-metrics"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    text = response.content.decode()
    for queue in SPREAD:
        assert f'queue="{queue}"' in text
