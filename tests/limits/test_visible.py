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


@pytest.fixture
def many_keys(echomq, jobs):
    """1,100 customers in use of a keyed cap, beside the queue's and the task's limits."""
    rate = RateLimit.parse("100000/s burst 100000")
    own = f"{rate.gate('*')} {rate.gate('app.tasks.call_api')}"
    for first in (0, 500, 1000):
        batch = [
            NewJob(
                payload="{}",
                task="app.tasks.call_api",
                limits=f"{own} {concurrency_gate('app.tasks.call_api', 1, f'c{n}')}",
            )
            for n in range(first, min(first + 500, 1100))
        ]
        jobs.enqueue_many("default", batch)
    while jobs.claim("default", "w1", count=500).jobs:
        pass
    return jobs


def test_many_keys_in_use_leave_every_limit_exported_and_one_series_per_task(many_keys):
    text = metrics.exposition(many_keys)
    family = 'queue="default",limit="conc:app.tasks.call_api#*"'
    assert f"echomq_limit_running{{{family}}} 1100" in text
    assert f"echomq_limit_keys{{{family}}} 1100" in text
    assert f"echomq_limit_waiting{{{family}}} 0" in text
    for rule in ("rate:*", "rate:app.tasks.call_api"):
        assert f'echomq_limit_tokens{{queue="default",limit="{rule}"}} ' in text
    assert len([line for line in text.splitlines() if line.startswith("echomq_limit_")]) == 7
    out = io.StringIO()
    call_command("echomq", "stats", "default", "--json", stdout=out)
    (queue,) = json.loads(out.getvalue())
    assert [(g["name"], g["keys"]) for g in queue["limits"]] == [
        ("conc:app.tasks.call_api#*", 1100), ("rate:*", None), ("rate:app.tasks.call_api", None)
    ]  # fmt: skip


def test_the_admin_shows_a_tasks_keyed_caps_as_one_row(many_keys, django_user_model):
    client = _client(django_user_model, "viewer", "view_queue")
    page = client.get("/admin/echomq/queues/default/pending/").content.decode()
    assert "conc · app.tasks.call_api#*" in page and "at most 1 at once per key" in page
    assert "1,100 running · 1,100 keys" in page
    assert "rate · the queue" in page and page.count("conc · ") == 1
