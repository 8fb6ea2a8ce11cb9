"""Each limit, its tokens / running count and its waiting jobs, on the admin's queue
page, in Prometheus and in ``manage.py echomq stats``."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from echomq_django import metrics
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.limits import RateLimit, concurrency_gate
from tests.admin.conftest import _client

pytestmark = pytest.mark.django_db


@pytest.fixture
def limited(echomq, jobs):
    rate = RateLimit.parse("2/m burst 2").gate("app.tasks.rated")
    cap = concurrency_gate("app.tasks.capped", 1)
    batch = [NewJob(payload="{}", task="app.tasks.rated", limits=rate) for _ in range(5)]
    batch += [NewJob(payload="{}", task="app.tasks.capped", limits=cap) for _ in range(3)]
    jobs.enqueue_many("default", batch)
    assert len(jobs.claim("default", "w1", count=20).jobs) == 3  # 2 tokens, 1 slot
    return jobs


def test_the_admin_queue_page_shows_each_limit(limited, django_user_model):
    client = _client(django_user_model, "viewer", "view_queue")
    page = client.get("/admin/echomq/queues/default/pending/").content.decode()
    assert 'id="emq-limits"' in page
    assert "rate · app.tasks.rated" in page and "2 per m, burst 2" in page
    assert "conc · app.tasks.capped" in page and "at most 1 at once" in page
    assert "1 running" in page and ">3<" in page and ">2<" in page  # waiting: 3 rated, 2 capped


def test_prometheus_exports_tokens_running_and_waiting(limited):
    text = metrics.exposition(limited)
    assert 'echomq_limit_running{queue="default",limit="conc:app.tasks.capped"} 1' in text
    assert 'echomq_limit_waiting{queue="default",limit="conc:app.tasks.capped"} 2' in text
    assert 'echomq_limit_waiting{queue="default",limit="rate:app.tasks.rated"} 3' in text
    assert 'echomq_limit_tokens{queue="default",limit="rate:app.tasks.rated"} 0.0' in text


def test_echomq_stats_lists_the_limits(limited):
    out = io.StringIO()
    call_command("echomq", "stats", stdout=out)
    text = out.getvalue()  # (a narrow console wraps the names)
    assert "Limits" in text and "1 running" in text and "0.0 tokens" in text
    out = io.StringIO()
    call_command("echomq", "stats", "default", "--json", stdout=out)
    (queue,) = json.loads(out.getvalue())
    waiting = {g["name"]: (g["level"], g["waiting"]) for g in queue["limits"]}
    assert waiting["conc:app.tasks.capped"] == (1.0, 2)
    assert waiting["rate:app.tasks.rated"][1] == 3
