"""One queue whose place is a key of another type does not hide the others.

The place guard refuses every script that needs that place (``CorruptKey``), the
stats script included. Before, one such queue made the whole metrics page a 503
(every queue's series gone at once) and ``echomq stats`` a traceback. Now the
others are read as usual and the broken one is named: a gauge to alert on, a line
on stderr.
"""

from __future__ import annotations

import json

import pytest

from echomq_django import metrics
from echomq_django.engine.errors import ScriptError
from echomq_django.engine.keyspace import WORKERS_KEY, QueueKeys
from tests.cli.conftest import echomq_cmd, enqueue
from tests.cli.test_metrics import URL, assert_strict_exposition, samples, scrape_token

__all__ = ["scrape_token"]  # a fixture of test_metrics, used here


def break_queue(jobs, queue: str) -> None:
    key = QueueKeys.of(queue).active
    jobs.connector.client.delete(key)
    jobs.connector.client.hset(key, "planted", "1")


def test_the_metrics_page_reads_the_other_queues_and_names_the_broken_one(jobs):
    enqueue(jobs, "default", 2)
    enqueue(jobs, "broken", 1)
    break_queue(jobs, "broken")
    text = metrics.exposition(jobs)
    assert_strict_exposition(text)
    got = samples(text)
    assert got[("echomq_jobs", (("queue", "default"), ("state", "pending")))] == 2
    assert got[("echomq_queue_unreadable", (("queue", "broken"),))] == 1
    assert not any(labels == (("queue", "broken"), ("state", "pending")) for _, labels in got)


def test_stats_shows_the_other_queues_and_says_which_it_cannot_read(jobs):
    enqueue(jobs, "default", 2)
    enqueue(jobs, "broken", 1)
    break_queue(jobs, "broken")
    shown = echomq_cmd("stats")
    assert "default" in shown.out
    assert "cannot read queue broken" in shown.err and "not a sorted set" in shown.err


# A key of another type at a queue's limits or schedules, or at the workers' registry:
# each used to take down the whole scrape, `echomq stats` or `echomq schedules`.
PLANTS = {
    "limits": lambda client: client.set(QueueKeys.of("broken").limits, "x"),
    "schedules": lambda client: client.set(QueueKeys.of("broken").schedules, "x"),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_corrupt_key_of_one_queue_leaves_the_scrape_and_the_commands_whole(jobs, plant):
    enqueue(jobs, "default", 2)
    enqueue(jobs, "broken", 1)
    PLANTS[plant](jobs.connector.client)
    got = samples(metrics.exposition(jobs))
    assert got[("echomq_jobs", (("queue", "default"), ("state", "pending")))] == 2
    assert got[("echomq_queue_unreadable", (("queue", "broken"),))] == 1
    shown = echomq_cmd("stats")
    assert "default" in shown.out
    assert ("cannot read the limits of queue broken" in shown.err) == (plant == "limits")
    assert {"broken", "default"} <= {
        s["queue"] for s in json.loads(echomq_cmd("stats", "--json").out)
    }
    listed = echomq_cmd("schedules")
    assert ("cannot read the schedules of queue broken" in listed.err) == (plant == "schedules")


def test_a_corrupt_workers_registry_leaves_out_only_the_workers(jobs):
    enqueue(jobs, "default", 2)
    jobs.connector.client.set(WORKERS_KEY, "x")
    got = samples(metrics.exposition(jobs))
    assert got[("echomq_jobs", (("queue", "default"), ("state", "pending")))] == 2
    assert not any(name == "echomq_workers" for name, _ in got)


def test_data_no_queue_can_be_blamed_for_is_a_502_not_server_unavailable(
    jobs, client, scrape_token, monkeypatch
):
    def corrupt(_jobs):
        raise ScriptError("WRONGTYPE Operation against a key holding the wrong kind of value")

    monkeypatch.setattr(metrics, "exposition", corrupt)
    response = client.get(URL, headers={"authorization": scrape_token})
    assert response.status_code == 502
    assert response.content.startswith(b"EchoMQ unreadable data: ScriptError: WRONGTYPE")
