"""The Prometheus endpoint: a valid exposition, the right numbers, access control."""

from __future__ import annotations

import re
import time

import pytest
from django.contrib.auth.models import Permission
from django.urls import resolve
from prometheus_client.parser import text_string_to_metric_families

from echomq_django import conf, metrics
from echomq_django.devserver import free_port
from echomq_django.engine import registry
from tests.cli.conftest import enqueue, make_completed, make_dead

TOKEN = "s3cret-scrape-token"
URL = "/metrics/echomq"

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_VALUE = r'"(?:[^"\\\n]|\\\\|\\"|\\n)*"'
_SAMPLE = re.compile(
    rf"({_NAME})(?:\{{[a-zA-Z_][a-zA-Z0-9_]*={_LABEL_VALUE}"
    rf"(?:,[a-zA-Z_][a-zA-Z0-9_]*={_LABEL_VALUE})*\}})? -?[0-9]+(?:\.[0-9]+)?"
)


def assert_strict_exposition(text: str) -> None:
    """Every line is HELP, TYPE or a sample of the family declared just before it."""
    assert text.endswith("\n")
    declared: set[str] = set()
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert re.fullmatch(_NAME, name) and name not in declared, line
            declared.add(name)
            current = name
        elif line.startswith("# TYPE "):
            assert re.fullmatch(rf"# TYPE {re.escape(current)} (counter|gauge)", line), line
        else:
            match = _SAMPLE.fullmatch(line)
            assert match and match.group(1) == current, line


def samples(text: str) -> dict[tuple[str, tuple], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


@pytest.fixture
def scrape_token(settings, echomq):
    settings.ECHOMQ = {**settings.ECHOMQ, "METRICS_TOKEN": TOKEN}
    return f"Bearer {TOKEN}"


def heartbeat(jobs, worker_id: str, queues: list[str], concurrency: int, running: int) -> None:
    now = time.time()
    info = registry.WorkerInfo(
        id=worker_id, host='odd"host\\name', pid=1, queues=queues, concurrency=concurrency,
        running=[f"job-{i}" for i in range(running)], started_at=now, last_seen=now,
    )  # fmt: skip
    registry.heartbeat(jobs.connector, info, ttl_s=30)


def test_the_exposition_is_valid_and_counts_right(jobs):
    make_dead(jobs, "default", 2)
    make_completed(jobs, "default", 3)
    enqueue(jobs, "default", 4)
    enqueue(jobs, "reports", 1)
    heartbeat(jobs, "w1", ["default", "emails"], concurrency=4, running=2)
    heartbeat(jobs, "w2", ["default"], concurrency=2, running=0)
    text = metrics.exposition(jobs)
    assert_strict_exposition(text)
    got = samples(text)
    jobs_in = {(q, s): got[("echomq_jobs", (("queue", q), ("state", s)))]
               for q in ("default", "emails", "reports")
               for s in ("pending", "scheduled", "active", "completed", "dead")}  # fmt: skip
    assert jobs_in[("default", "pending")] == 4
    assert jobs_in[("default", "completed")] == 3
    assert jobs_in[("default", "dead")] == 2
    assert jobs_in[("reports", "pending")] == 1
    assert sum(jobs_in.values()) == 10
    default = (("queue", "default"),)
    assert got[("echomq_enqueued_total", default)] == 9
    assert got[("echomq_completed_total", default)] == 3
    assert got[("echomq_dead_total", default)] == 2
    assert got[("echomq_failed_total", default)] == 2
    assert got[("echomq_retried_total", default)] == 0
    assert got[("echomq_workers", ())] == 2
    assert got[("echomq_queue_workers", default)] == 2
    assert got[("echomq_queue_workers", (("queue", "emails"),))] == 1
    assert got[("echomq_queue_workers", (("queue", "reports"),))] == 0
    assert got[("echomq_worker_slots", ())] == 6
    assert got[("echomq_worker_running_jobs", ())] == 2


def test_retried_and_reaped_leases_are_counted(jobs):
    enqueue(jobs, "default", 2, max_attempts=5)
    first, _expires = jobs.claim("default", "w1", count=2, lease_ms=50).jobs
    jobs.retry("default", first.id, first.token, error="{}", summary="boom")
    time.sleep(0.1)
    assert jobs.reap("default").moved == 1  # the second lease ran out
    got = samples(metrics.exposition(jobs))
    default = (("queue", "default"),)
    assert got[("echomq_retried_total", default)] == 1
    assert got[("echomq_failed_total", default)] == 1
    assert got[("echomq_reaped_total", default)] == 1


def test_label_values_are_escaped_and_parse_back():
    family = metrics.Family("x_info", "gauge", "help with \\ and\nnewline")
    family.samples = [({"name": 'a"b\\c\nd'}, 1)]
    text = family.render()
    assert text.splitlines()[2] == 'x_info{name="a\\"b\\\\c\\nd"} 1'
    assert_strict_exposition(text)
    [parsed] = text_string_to_metric_families(text)
    assert parsed.samples[0].labels == {"name": 'a"b\\c\nd'}
    assert parsed.documentation == "help with \\ and\nnewline"


# ---------------------------------------------------------------------------------------
# The view
# ---------------------------------------------------------------------------------------


def test_the_example_project_mounts_the_view():
    assert resolve(URL).func is metrics.prometheus_view


def test_a_bearer_token_reads_the_page(client, jobs, scrape_token):
    enqueue(jobs, "default", 1)
    response = client.get(URL, headers={"authorization": scrape_token})
    assert response.status_code == 200
    assert response["Content-Type"] == metrics.CONTENT_TYPE
    # Answered per credential: no shared cache may keep it and hand it to another.
    assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
    assert {"authorization", "cookie"} <= {v.strip().lower() for v in response["Vary"].split(",")}
    body = response.content.decode()
    assert_strict_exposition(body)
    assert samples(body)[("echomq_jobs", (("queue", "default"), ("state", "pending")))] == 1


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
def test_anything_else_is_forbidden(client, scrape_token, header):
    headers = {"authorization": header} if header else {}
    assert client.get(URL, headers=headers).status_code == 403


def test_without_a_token_configured_no_bearer_gets_in(client, echomq):
    assert client.get(URL, headers={"authorization": "Bearer "}).status_code == 403


@pytest.mark.django_db
def test_staff_users_with_view_queue_read_it_and_other_users_do_not(
    client, echomq, django_user_model
):
    user = django_user_model.objects.create_user("op", password="pw")
    client.force_login(user)
    assert client.get(URL).status_code == 403
    user.is_staff = True
    user.save()
    assert client.get(URL).status_code == 403, "staff without echomq.view_queue"
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="echomq", codename="view_queue")
    )
    user = django_user_model.objects.get(pk=user.pk)  # a fresh permission cache
    client.force_login(user)
    assert client.get(URL).status_code == 200


def test_only_safe_methods(client, scrape_token):
    assert client.post(URL, headers={"authorization": scrape_token}).status_code == 405


def test_an_unreachable_server_is_a_503(client, settings):
    settings.ECHOMQ = {"URL": f"redis://127.0.0.1:{free_port()}/0", "METRICS_TOKEN": TOKEN}
    conf.reset()
    response = client.get(URL, headers={"authorization": f"Bearer {TOKEN}"})
    conf.reset()
    assert response.status_code == 503
    assert b"EchoMQ server unavailable" in response.content
