"""Server data no EchoMQ process wrote: every reader survives it, and enqueue refuses
arguments no JSON reader could take back.

One non-UTF-8 member in the queue registry used to make every ``runreaper``
exit with status 1 (no expired lease ever returned) and ``/metrics/echomq``
answer 500. Replies are now decoded with non-UTF-8 bytes as escapes (the
connector's ``READ_ERRORS``), and each reader validates what it reads.
"""

from __future__ import annotations

import pytest

from echomq_django import conf
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.keyspace import QUEUES_KEY, WORKERS_KEY, QueueKeys, worker_key
from echomq_django.exceptions import InvalidTaskArguments
from tests.cli.conftest import echomq_cmd, manage_py
from tests.django.tasks import echo

Q = "default"
TOKEN = "scrape-token-for-hostile-bytes"


def plant_registry(raw) -> None:
    raw.sadd(QUEUES_KEY, b"bad\xff", b"\xc3", b"{tag}")
    raw.zadd(WORKERS_KEY, {b"w\xff": 1, "w-nan": 2})
    raw.hset(worker_key("w-nan"), mapping={"host": b"h\xff", "pid": "1", "last_seen": "nan"})


def test_the_reaper_sweeps_past_a_registry_it_did_not_write(echomq, url):
    jobs = conf.get_jobs()
    jobs.enqueue(Q, NewJob(payload="{}"))
    (lost,) = jobs.claim(Q, "dead-worker", lease_ms=1).jobs  # its worker died
    plant_registry(echomq)
    done = manage_py("runreaper", "--once", url=url)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert jobs.get(Q, lost.id).state == "pending"


@pytest.mark.django_db
def test_metrics_and_the_cli_read_past_it(echomq, settings, client):
    settings.ECHOMQ = {**settings.ECHOMQ, "METRICS_TOKEN": TOKEN}
    echo.enqueue("x")
    plant_registry(echomq)
    echomq.hset(QueueKeys.of(Q).metrics, b"odd\xff", b"\xff")
    response = client.get("/metrics/echomq", headers={"authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert 'echomq_jobs{queue="default",state="pending"} 1' in response.content.decode()
    assert "echomq_workers 0" in response.content.decode()
    assert [s["queue"] for s in echomq_cmd("stats", "--json").json()] == [Q]
    assert echomq_cmd("workers", "--json").json() == []


def test_a_row_with_bytes_that_are_not_utf8_is_read(echomq):
    result = echo.enqueue("x")
    echomq.hset(QueueKeys.of(Q).job(result.id), "last_error", b"caf\xe9")
    job = conf.get_jobs().get(Q, result.id)
    assert job.last_error == r"caf\xe9"
    shown = echomq_cmd("inspect", result.id, "--json").json()
    assert shown["last_error"] == r"caf\xe9"


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("where", ["args", "kwargs"])
def test_arguments_nested_20000_deep_are_refused_and_nothing_is_written(echomq, where):
    deep = nested(20_000)
    with pytest.raises(InvalidTaskArguments, match="nested more than 100 deep"):
        if where == "args":
            echo.enqueue(deep)
        else:
            echo.enqueue(value=deep)
    assert echomq.dbsize() == 0


def test_counters_no_script_wrote_do_not_break_stats_or_throughput(echomq):
    jobs = conf.get_jobs()
    echo.enqueue("x")
    keys = QueueKeys.of(Q)
    echomq.hset(keys.metrics, "odd", "²")
    now_minute = int(jobs.connector.client.time()[0]) // 60
    echomq.hset(keys.throughput(now_minute), "completed", "x")
    assert jobs.stats(Q).counts["pending"] == 1
    assert len(jobs.throughput(Q, 5)) == 5
