"""One queue whose place is a key of another type does not hide the others.

The place guard refuses every script that needs that place (``CorruptKey``), the
stats script included. Before, one such queue made the whole metrics page a 503
(every queue's series gone at once) and ``echomq stats`` a traceback. Now the
others are read as usual and the broken one is named: a gauge to alert on, a line
on stderr.
"""

from __future__ import annotations

from echomq_django import metrics
from echomq_django.engine.keyspace import QueueKeys
from tests.cli.conftest import echomq_cmd, enqueue
from tests.cli.test_metrics import assert_strict_exposition, samples


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
