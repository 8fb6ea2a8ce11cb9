"""Valid but extreme values on the admin's pages: each renders, never a 500.

A time a day or less from a datetime's ends (year 1, year 9999) is stored as any
other, but converting it to the page's zone overflows; a counter of 400 digits is
an integer no float holds. Each page shows what it can and says what it cannot.
"""

from __future__ import annotations

import json

import pytest

from echomq_django.engine.error_record import error_json
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.payload import Payload

from . import seed
from .test_views import ROOT, job_url, list_url

pytestmark = pytest.mark.django_db
Q = "emails"
KEYS = QueueKeys.of(Q)
FIRST_MS, LAST_MS = -62135596800000, 253402300799999  # 0001-01-01, 9999-12-31 23:59:59.999 UTC


@pytest.mark.parametrize(
    "run_after",
    ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:00-14:00", "0001-01-01T00:00:00+01:00"],
)
def test_a_run_after_at_a_datetime_end_is_shown_as_stored(jobs, superuser, run_after):
    job_id = jobs.enqueue(Q, seed.new_job(run_after=run_after)).id
    response = superuser.get(job_url(Q, job_id))
    assert response.status_code == 200
    assert f"<code>{run_after}</code>" in response.content.decode()  # raw, as a non-ISO one


@pytest.mark.parametrize("zone", ["America/New_York", "Pacific/Kiritimati"])
@pytest.mark.parametrize("ms", [FIRST_MS, LAST_MS])
def test_every_time_at_a_datetime_end_renders_in_any_zone(jobs, superuser, settings, zone, ms):
    settings.TIME_ZONE = zone
    (job_id,) = seed.scheduled(jobs, Q)
    fields = {"due_ms": ms, "enqueued_at": ms * 1000, "lease_deadline": ms}
    jobs.connector.client.hset(KEYS.job(job_id), mapping=fields)
    for url in (job_url(Q, job_id), list_url(Q, "scheduled"), ROOT):
        response = superuser.get(url)
        assert response.status_code == 200, url
    assert f"not a time: {ms}" in superuser.get(job_url(Q, job_id)).content.decode()


def minute_key(jobs) -> str:
    return KEYS.throughput(int(jobs.connector.client.time()[0]) // 60)


def test_a_counter_no_counter_reaches_reads_as_unreadable(jobs, superuser, redis_client):
    seed.enqueue(jobs, "default")
    redis_client.hset(minute_key(jobs), mapping={"completed": "9" * 400, "failed": "1"})
    redis_client.hset(KEYS.metrics, mapping={"enqueued": "9" * 400, "completed": "-5"})
    response = superuser.get(ROOT)
    assert response.status_code == 200
    assert response.context["chart"].completed == 0 and response.context["chart"].failed == 1
    assert jobs.stats(Q).metrics.get("enqueued") is None  # so never a scrape's 400 digits
    assert jobs.stats(Q).metrics.get("completed") is None


def test_a_minute_of_another_type_marks_its_queue_unreadable(jobs, superuser, redis_client):
    seed.enqueue(jobs, "default", 2)
    redis_client.set(minute_key(jobs), "x")
    response = superuser.get(ROOT)
    assert response.status_code == 200
    (broken,) = [q for q in response.context["queues"] if q.problem]
    assert broken.name == Q and "WRONGTYPE" in broken.problem
    assert "Cannot read this queue" in response.content.decode()


def test_a_large_valid_job_is_read_whole_and_shown_cut(jobs, superuser):
    body = Payload(task="shop.tasks.big", args=["A" * 20_000], kwargs={}, backend="default")
    job_id = jobs.enqueue(Q, NewJob(payload=body.dumps(), task="shop.tasks.big")).id
    claim = jobs.claim(Q, "w-1", count=1, lease_ms=60_000, start_now=1)
    jobs.complete(Q, job_id, claim.jobs[0].token, json.dumps({"rows": ["B" * 20_000]}))
    response = superuser.get(job_url(Q, job_id))
    payload = response.context["payload"]
    assert not payload.problem and payload.args.startswith('[\n  "AAA')
    assert len(payload.args) < 10_100 and payload.args.endswith("characters)")
    assert response.context["result_is_json"]


def test_every_error_of_a_job_that_failed_often_is_its_own_record(jobs, superuser):
    job_id = jobs.enqueue(Q, seed.new_job(max_attempts=4)).id
    for _ in range(4):
        claim = jobs.claim(Q, "w-1", count=1, lease_ms=60_000, start_now=1)
        error = error_json("app.errors.Boom", "Traceback\n" + "x" * 5_000 + "\nBoom: it broke")
        jobs.retry(Q, job_id, claim.jobs[0].token, error=error, summary="Boom", backoff_ms=0)
    response = superuser.get(job_url(Q, job_id))
    errors = response.context["errors"]
    assert [e["exception_class_path"] for e in errors] == ["app.errors.Boom"] * 4
    assert "Boom: it broke" in response.content.decode()
