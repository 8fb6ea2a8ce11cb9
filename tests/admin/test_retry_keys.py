"""Retry from the admin of a dead job whose idempotency key a newer live job holds:
refused with the reason, the job stays dead (keys stay unique)."""

from __future__ import annotations

import pytest

from . import seed
from .test_views import job_url, messages_of

pytestmark = pytest.mark.django_db


def test_retry_of_a_dead_job_whose_key_is_taken_says_which_job_holds_it(jobs, changer):
    (dead,) = seed.dead(jobs, "emails", idempotency_key="order-7")
    (holder,) = seed.enqueue(jobs, "emails", idempotency_key="order-7")
    done = changer.post(job_url("emails", dead, "retry"), follow=True)
    text = " ".join(messages_of(done))
    assert f"not retried: its idempotency key is held by live job {holder}" in text
    assert jobs.get("emails", dead).state == "dead"
