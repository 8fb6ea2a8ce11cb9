"""The task options on the Django side: what enqueue() returns for throttle and debounce,
and the limits a row carries (the concurrency key evaluated at enqueue)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from echomq_django.compat import TaskResultStatus
from echomq_django.engine.errors import InvalidJobOptions
from tests.limits import tasks


def test_throttle_returns_the_windows_job_whatever_its_state(echomq, jobs):
    keyed = tasks.sync_once.using(idempotency_key="customer-7")
    first = keyed.enqueue(7)
    assert keyed.enqueue(7).id == first.id  # pending: the same job
    (claimed,) = jobs.claim("default", "w1").jobs
    jobs.complete("default", claimed.id, claimed.token, "7")
    again = keyed.enqueue(7)  # finished, still inside the window: no new job
    assert (again.id, again.status) == (first.id, TaskResultStatus.SUCCESSFUL)
    counts = jobs.stats("default").counts
    assert (counts["pending"], counts["completed"]) == (0, 1)
    # The key outlives the job for the window (30 s), so the row is kept as long.
    assert jobs.get("default", first.id).result_ttl_ms >= 30_000
    (key,) = echomq.scan_iter("emq:{default}:idem:*")
    assert 0 < echomq.pttl(key) <= 30_000
    echomq.delete(key)  # the window ends (its key expires)
    assert keyed.enqueue(7).id != first.id  # a new window: a new job


def test_debounce_gives_the_waiting_job_the_last_arguments_and_pushes_it_back(echomq, jobs):
    keyed = tasks.reindex.using(idempotency_key="doc-1")
    first = keyed.enqueue("v1")
    due_1 = jobs.get("default", first.id).due_ms
    second = keyed.enqueue("v2")
    assert second.id == first.id and second.args == ["v2"]  # the same job, the new arguments
    row = jobs.get("default", first.id)
    assert row.state == "scheduled" and row.due_ms >= due_1
    assert jobs.stats("default").counts["scheduled"] == 1
    # Once it runs, the next enqueue is a new job (it takes the key).
    jobs.run_now("default", first.id)
    (claimed,) = jobs.claim("default", "w1").jobs
    assert claimed.id == first.id
    third = keyed.enqueue("v3")
    assert third.id != first.id and jobs.get("default", third.id).state == "scheduled"


def test_the_concurrency_key_is_evaluated_at_enqueue_and_stored(echomq, jobs):
    a, b = tasks.call_api.enqueue(1), tasks.call_api.enqueue(2)
    tasks.call_api.enqueue(1)
    limits = jobs.get("default", a.id).limits.split()
    assert limits[0] == "rate:tests.limits.tasks.call_api/5/1000/2"
    assert limits[1].startswith("conc:tests.limits.tasks.call_api#")
    assert limits[1] != jobs.get("default", b.id).limits.split()[1]  # one cap per customer
    got = [c.id for c in jobs.claim("default", "w1", count=10).jobs]
    assert got == [a.id, b.id]  # the burst of 2, one per customer


def test_bad_flow_options_fail_the_enqueue_and_store_nothing(echomq, jobs):
    tasks.call_api.enqueue(1)  # the control
    for changes in [{"rate_limit": "fast"}, {"concurrency": 0}, {"concurrency_key": "x"}]:
        with pytest.raises(InvalidJobOptions):
            replace(tasks.call_api, **changes).enqueue(1)
    with pytest.raises(InvalidJobOptions):
        tasks.sync_once.enqueue(1)  # throttle without an idempotency key
    assert jobs.stats("default").counts["pending"] == 1
