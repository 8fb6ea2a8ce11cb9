"""The admin facing data no EchoMQ script wrote: a page that says what is wrong, never a 500.

Each row or member here is planted with a raw client, as anyone with write access
to the server could: a row key holding a STRING, a byte that is not UTF-8, a due
time past what a datetime holds, a member no job id can be, JSON nested past
what a parser takes, a queue's set of the wrong type. Corrupt rows are
deletable from their own page.
"""

from __future__ import annotations

import json

import pytest
from django.core.management.base import CommandError

from echomq_django import metrics
from echomq_django.engine import registry
from echomq_django.engine.keyspace import QUEUES_KEY, WORKERS_KEY, QueueKeys, new_job_id, worker_key
from tests.cli.conftest import echomq_cmd

from . import seed
from .test_views import ROOT, job_url, list_url, messages_of

pytestmark = pytest.mark.django_db
Q = "emails"
KEYS = QueueKeys.of(Q)


def get(client, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, (url, response.status_code)
    return response.content.decode()


def delete(client, queue: str, job_id: str):
    return client.post(job_url(queue, job_id, "delete"), {"confirm": "yes"}, follow=True)


def test_a_row_key_holding_a_string_has_a_page_and_can_be_deleted(jobs, redis_client, deleter):
    job_id = new_job_id()
    redis_client.set(KEYS.job(job_id), b"planted \xff text")
    redis_client.zadd(KEYS.dead, {job_id: 1})
    page = get(deleter, job_url(Q, job_id))
    assert "its key holds a string, not a row" in page
    assert r"planted \xff text" in page  # the bytes, shown escaped
    assert "Delete" in page
    done = delete(deleter, Q, job_id)
    assert "deleted (its row was corrupt: string)" in " ".join(messages_of(done))
    assert not redis_client.exists(KEYS.job(job_id)) and not redis_client.zscore(KEYS.dead, job_id)


def test_a_row_without_a_state_can_be_deleted(jobs, redis_client, deleter):
    job_id = new_job_id()
    redis_client.hset(KEYS.job(job_id), mapping={"id": job_id, "payload": "{}"})
    redis_client.zadd(KEYS.pending, {job_id: 1})
    assert "no &#x27;state&#x27; field" in get(deleter, job_url(Q, job_id))
    done = delete(deleter, Q, job_id)
    assert "its row was corrupt: no state" in " ".join(messages_of(done))
    assert not redis_client.exists(KEYS.job(job_id)) and not redis_client.zcard(KEYS.pending)


def test_a_list_holding_a_row_with_a_byte_that_is_not_utf8(jobs, redis_client, viewer):
    (job_id,) = seed.dead(jobs, Q)
    redis_client.hset(KEYS.job(job_id), "last_error", b"ValueError: caf\xe9 \xff")
    redis_client.hset(KEYS.job(job_id), "task", b"shop.\xfe")
    page = get(viewer, list_url(Q, "dead"))
    assert r"ValueError: caf\xe9 \xff" in page and r"shop.\xfe" in page
    detail = get(viewer, job_url(Q, job_id))
    assert r"caf\xe9" in detail


def test_a_list_shows_a_huge_field_cut(jobs, redis_client, viewer):
    """The job's own page cuts what it shows; a list showed a planted 10 MB last error in
    full, twice (its title and its text): a 40 MB page."""
    job_id = new_job_id()
    huge = "E" * 10_000_000
    redis_client.hset(KEYS.job(job_id), mapping={
        "state": "dead", "task": "T" * 1_000_000, "worker": "W" * 1_000_000, "last_error": huge,
    })  # fmt: skip
    redis_client.zadd(KEYS.dead, {job_id: 1})
    page = get(viewer, list_url(Q, "dead"))
    assert len(page) < 200_000
    assert "E" * 499 + "…" in page and "T" * 499 + "…" in page


def test_a_due_time_no_datetime_holds_is_named(jobs, redis_client, viewer):
    (job_id,) = seed.scheduled(jobs, Q)
    redis_client.hset(KEYS.job(job_id), "due_ms", str(2**52))
    redis_client.hset(KEYS.job(job_id), "enqueued_at", "-99999999999999999999")
    redis_client.zadd(KEYS.scheduled, {job_id: 2**52})
    listing = get(viewer, list_url(Q, "scheduled"))
    assert f"due_ms not a time: {2**52}" in listing
    assert "enqueued_at not a time" in listing
    assert f"not a time: {2**52}" in get(viewer, job_url(Q, job_id))


@pytest.mark.parametrize("page", ["22000000000", "-5", "99999999999999999999999", "x"])
def test_any_page_number_answers_a_page(jobs, viewer, page):
    seed.enqueue(jobs, Q, 2)
    text = get(viewer, list_url(Q, "pending") + f"?page={page}")
    assert "past the end of the list" in text or "2 of <strong>2</strong>" in text


def test_a_member_no_job_id_can_be_is_listed_without_a_link(jobs, redis_client, changer):
    seed.dead(jobs, Q)
    redis_client.zadd(KEYS.dead, {b"not-an-id \xff": 0, b"../../etc": 1})
    page = get(changer, list_url(Q, "dead"))
    assert r"“not-an-id \xff” is not a job id" in page
    assert "“../../etc” is not a job id" in page


def test_json_nested_past_the_parser_is_shown_raw(jobs, redis_client, viewer):
    (job_id,) = seed.dead(jobs, Q)
    deep = "[" * 100_000 + "]" * 100_000
    redis_client.hset(KEYS.job(job_id), mapping={"payload": deep, "errors": deep})
    page = get(viewer, job_url(Q, job_id))
    assert "nested too deeply" in page


def test_a_queue_set_of_another_type_is_a_page_saying_so(jobs, redis_client, viewer):
    seed.enqueue(jobs, Q)
    seed.enqueue(jobs, "healthy", 3)
    redis_client.delete(KEYS.dead)
    redis_client.set(KEYS.dead, "planted")
    for url in (list_url(Q, "dead"), list_url(Q, "pending")):
        page = get(viewer, url, status=502)
        assert "holds a string, not a sorted set" in page and "cannot read" in page
    # The dashboard shows the other queues, and says which one it cannot read and why.
    page = get(viewer, ROOT)
    assert "Cannot read this queue" in page and "holds a string, not a sorted set" in page
    assert list_url("healthy", "pending") in page


def test_registry_entries_it_did_not_write_do_not_break_the_dashboard(jobs, redis_client, viewer):
    seed.enqueue(jobs, Q)
    redis_client.sadd(QUEUES_KEY, b"bad\xffqueue", b"{braces}")
    seed.add_worker(jobs, "w-good", [Q], 2, 1)
    redis_client.zadd(WORKERS_KEY, {
        b"w-\xff": 1, "w-nan": 2, "w-deep": 3, "w-wrongtype": 4, "w-wide": 5, "w-badname": 6,
    })  # fmt: skip
    redis_client.hset(worker_key("w-nan"), mapping=_worker_fields(last_seen="nan"))
    redis_client.hset(worker_key("w-deep"), mapping=_worker_fields(queues="[" * 50_000))
    redis_client.set(worker_key("w-wrongtype"), "x")
    wide = json.dumps([f"q{i}" for i in range(20_000)])  # would be 20,000 metrics series
    redis_client.hset(worker_key("w-wide"), mapping=_worker_fields(queues=wide))
    redis_client.hset(worker_key("w-badname"), mapping=_worker_fields(queues='["a\\nb"]'))
    page = get(viewer, ROOT)
    assert "w-good" in page and "w-nan" not in page and "w-deep" not in page
    assert [w.id for w in registry.list_workers(jobs.connector)] == ["w-good"]
    assert jobs.queues() == [Q]
    assert len(metrics.exposition(jobs)) < 20_000


def _worker_fields(**changes: str) -> dict[str, str]:
    fields = {
        "host": "h", "pid": "1", "queues": json.dumps([Q]), "concurrency": "1",
        "running": "[]", "started_at": "1.0", "last_seen": "2.0",
    }  # fmt: skip
    return {**fields, **changes}


def test_a_corrupt_key_of_one_queue_is_that_queues_problem_on_every_page(
    jobs, redis_client, viewer
):
    seed.enqueue(jobs, Q)
    seed.enqueue(jobs, "default", 2)
    redis_client.set(KEYS.limits, "x")
    redis_client.set(KEYS.schedules, "x")
    page = get(viewer, list_url(Q, "pending"))  # its jobs, and what cannot be read
    assert "Cannot read this queue's limits" in page and "emq-job-list" in page
    page = get(viewer, f"{ROOT}schedules/")
    assert "Cannot read the schedules of queue emails" in page
    redis_client.delete(KEYS.pending)
    redis_client.hset(KEYS.pending, "a", "b")
    found = viewer.get(f"{ROOT}search/", {"id": seed.new_job().task}, follow=True)
    assert found.status_code == 200
    assert list_url("default", "pending") in found.content.decode()
    assert any("Cannot read queue emails" in m for m in messages_of(found))


def test_a_corrupt_workers_registry_leaves_the_dashboard_whole(jobs, redis_client, viewer):
    seed.enqueue(jobs, Q)
    redis_client.set(WORKERS_KEY, "x")
    page = get(viewer, ROOT)
    assert "Cannot read the workers' registry" in page and list_url(Q, "pending") in page


@pytest.mark.parametrize(
    "errors",
    [
        [{"traceback": "x"}],
        [{}],
        ["plain string"],
        [7, None, [1]],
        [{"exception_class_path": {"a": 1}, "traceback": 5, "worker": [], "at_us": "nan"}],
    ],
)
def test_error_entries_no_worker_wrote_are_shown_never_a_500(jobs, redis_client, viewer, errors):
    (job_id,) = seed.enqueue(jobs, Q)
    redis_client.hset(KEYS.job(job_id), "errors", json.dumps(errors))
    response = viewer.get(job_url(Q, job_id))
    assert response.status_code == 200
    assert len(response.context["errors"]) == len(errors)
    shown = echomq_cmd("inspect", job_id, "--json")
    assert len(json.loads(shown.out)["errors"]) == len(errors)
    assert echomq_cmd("inspect", job_id).out


@pytest.mark.parametrize("planted", ["../../etc/passwd", "other"])
def test_a_row_holding_another_id_than_its_key_is_corrupt(jobs, redis_client, deleter, planted):
    job_id, other = seed.enqueue(jobs, Q, 2)
    redis_client.hset(KEYS.job(job_id), "id", other if planted == "other" else planted)
    page = get(deleter, job_url(Q, job_id))
    assert "not its key&#x27;s" in page
    assert job_url(Q, job_id, "delete") in page and job_url(Q, other, "delete") not in page
    with pytest.raises(CommandError, match="CorruptRow"):
        echomq_cmd("inspect", job_id)
    with pytest.raises(CommandError, match="CorruptRow"):
        echomq_cmd("cancel", job_id)
