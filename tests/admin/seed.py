"""Jobs for the admin's tests, and demo data for the browser tests and screenshots.

Jobs are put in place with the engine's own transitions (enqueue, claim,
complete, retry with give_up). Two things cannot be made in a test's few
seconds and are written directly: the last hour of per-minute throughput
counters (the HASHes ``Jobs.throughput`` reads) and live entries in the worker
registry (through ``registry.heartbeat``, as a worker writes them).
"""

from __future__ import annotations

import json
import math
import random
import time
from typing import Any

from echomq_django.engine import registry
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.payload import Payload

WORKER = "worker-1"
TRACEBACK = """Traceback (most recent call last):
  File "/srv/shop/echomq_django/execution.py", line 88, in _run
    value = task.call(*args, **kwargs)
  File "/srv/shop/shop/tasks.py", line 41, in charge_card
    receipt = gateway.charge(order.total, token=order.card_token)
  File "/srv/shop/shop/payments.py", line 117, in charge
    raise PaymentDeclined(reply["decline_code"])
shop.payments.PaymentDeclined: card_declined (insufficient funds)
"""
ERROR = json.dumps(
    {"exception_class_path": "shop.payments.PaymentDeclined", "traceback": TRACEBACK}
)
SUMMARY = "shop.payments.PaymentDeclined: card_declined (insufficient funds)"


def new_job(n: int = 0, *, task: str = "shop.tasks.charge_card", **fields: object) -> NewJob:
    """The n-th job of a batch, with a payload written the way the backend writes it."""
    kwargs = {"order": 7, "amount_cents": 4999, "currency": "EUR"}
    body = Payload(task=task, args=[1000 + n], kwargs=kwargs, backend="default")
    return NewJob(payload=body.dumps(), task=task, **fields)


def enqueue(
    jobs: Jobs, queue: str = "emails", n: int = 1, task: str = "shop.tasks.charge_card", **fields
) -> list[str]:
    return [
        e.id for e in jobs.enqueue_many(queue, [new_job(i, task=task, **fields) for i in range(n)])
    ]


def dead(jobs: Jobs, queue: str = "emails", n: int = 1, attempts: int = 1, **kwargs) -> list[str]:
    """Jobs that failed for good, as a worker fails them: claimed and retried until dead.

    With ``attempts`` > 1 each job fails that many times (max_attempts = attempts),
    so its row holds one error and one worker id per attempt. Call it while the
    queue has nothing else pending: claims take the oldest pending jobs.
    """
    ids = enqueue(jobs, queue, n, max_attempts=attempts, **kwargs)
    for attempt in range(1, attempts + 1):
        claim = jobs.claim(
            queue, f"{WORKER[:-1]}{attempt}", count=n, lease_ms=60_000, start_now=n
        )  # each claim's jobs ran: one worker id per run
        for c in claim.jobs:
            jobs.retry(
                queue, c.id, c.token, error=ERROR, summary=SUMMARY,
                give_up=attempt == attempts, ran_us=0,
            )  # fmt: skip
    return ids


def completed(jobs: Jobs, queue: str = "emails", n: int = 1, **kwargs) -> list[str]:
    enqueue(jobs, queue, n, **kwargs)
    claim = jobs.claim(queue, WORKER, count=n, lease_ms=60_000, start_now=n)
    done = [(queue, c.id, c.token, '{"sent": true}') for c in claim.jobs]
    jobs.complete_many(done, ran_us=[0] * len(done))  # each run began just now
    return [c.id for c in claim.jobs]


def active(jobs: Jobs, queue: str = "emails", n: int = 1, worker: str = WORKER) -> list[str]:
    enqueue(jobs, queue, n)
    claim = jobs.claim(queue, worker, count=n, lease_ms=120_000, start_now=n)
    return [c.id for c in claim.jobs]


def scheduled(
    jobs: Jobs, queue: str = "emails", n: int = 1, in_s: int = 3600, **kwargs
) -> list[str]:
    due = int(jobs.connector.client.time()[0] + in_s) * 1000
    made = [new_job(i, due_ms=due + i * 60_000, **kwargs) for i in range(n)]
    return [e.id for e in jobs.enqueue_many(queue, made)]


def fill_throughput(jobs: Jobs, queue: str, rate: float, failure: float, seed: int) -> None:
    """An hour of per-minute counters shaped like a working day's traffic."""
    rng = random.Random(seed)
    keys = QueueKeys.of(queue)
    now_minute = int(jobs.connector.client.time()[0]) // 60
    pipe = jobs.connector.client.pipeline(transaction=False)
    for age in range(60):
        wave = 1 + 0.45 * math.sin((now_minute - age) / 7 + seed) + 0.25 * math.sin(age / 2.3)
        done = max(0, int(rate * wave * rng.uniform(0.8, 1.2)))
        failed = int(done * failure * rng.uniform(0, 2)) if rng.random() < 0.5 else 0
        key = keys.throughput(now_minute - age)
        pipe.hset(key, mapping={"completed": done, "failed": failed})
        pipe.expire(key, 7200)
    pipe.execute()


def add_worker(
    jobs: Jobs, worker_id: str, queues: list[str], concurrency: int, busy: int, **more: Any
) -> None:
    now = time.time()
    info = registry.WorkerInfo(
        id=worker_id, host=worker_id.split(".")[0], pid=4000 + 7 * len(queues) + busy,
        queues=queues, concurrency=concurrency, running=[f"job-{i}" for i in range(busy)],
        started_at=now - 3 * 3600 - 97 * busy, last_seen=now - 1, **more,
    )  # fmt: skip
    registry.heartbeat(jobs.connector, info, ttl_s=600)


def populate(jobs: Jobs) -> dict[str, list[str]]:
    """Several busy queues, a populated chart, workers; returns the dead job ids by queue."""
    shape = {
        "default": ("shop.tasks.send_receipt", 38.0, 0.02),
        "emails": ("shop.tasks.send_newsletter", 64.0, 0.01),
        "payments": ("shop.tasks.charge_card", 18.0, 0.35),
        "reports": ("analytics.tasks.build_report", 9.0, 0.1),
    }
    found = {
        "payments": dead(jobs, "payments", 4, attempts=3),
        "emails": dead(jobs, "emails", task="shop.tasks.send_newsletter"),
    }
    for seed, (queue, (task, rate, failure)) in enumerate(shape.items()):
        fill_throughput(jobs, queue, rate, failure, seed)
        completed(jobs, queue, 5 + 3 * seed, task=task)
        enqueue(jobs, queue, 7 * (4 - seed), task=task, priority=seed % 3)
        scheduled(jobs, queue, seed + 2, in_s=600 * (seed + 1), task=task)
        active(jobs, queue, seed + 1, worker=f"web-{seed}.shop:{4100 + seed}")
    add_worker(jobs, "web-1.shop:4101", ["default", "emails"], 8, 5)
    add_worker(jobs, "web-2.shop:4102", ["default", "emails"], 8, 3)
    add_worker(jobs, "batch-1.shop:5120", ["payments", "reports"], 4, 4)
    return found
