"""The backend unchanged on a 3-master Valkey Cluster: queues on different slots."""

from __future__ import annotations

import pytest

from echomq_django import conf
from echomq_django.compat import TaskResultStatus
from echomq_django.engine.worker import Worker
from echomq_django.execution import execute
from tests.django import settings as test_settings
from tests.django import tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster_jobs(settings, cluster_url, cluster_client):
    settings.ECHOMQ = {"URL": cluster_url}
    settings.TASKS = test_settings.TASKS
    conf.reset()
    yield conf.get_jobs()
    conf.reset()


def test_enqueue_run_and_read_results_on_a_cluster(cluster_jobs):
    results = [
        tasks.add.enqueue(1, 2),
        tasks.fail.enqueue("on the cluster"),  # queue "emails"
        tasks.echo.using(queue_name="slow").enqueue("x"),
    ]
    Worker(cluster_jobs, ["default", "emails", "slow"], execute, burst=True, idle_block_s=0.2).run()
    ok, failed, echoed = (r.task.get_result(r.id) for r in results)
    assert ok.return_value == 3
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 2
    assert echoed.return_value == {"args": ["x"], "kwargs": {}}
