"""Demo data for the admin's browser tests and the README's screenshots.

Jobs are put in place with the engine's own transitions (enqueue, claim,
complete, retry with give_up). Two things cannot be made in a test's few
seconds and are written directly: the last hour of per-minute throughput
counters (the HASHes ``Jobs.throughput`` reads) and live entries in the worker
registry (through ``registry.heartbeat``, as a worker writes them).
"""

from __future__ import annotations

import json
import math
import os
import random
import time

from echomq_django.engine import registry
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.payload import Payload

TRACEBACK = """Traceback (most recent call last):
  File "/srv/shop/echomq_django/execution.py", line 88, in _run
    value = task.call(*args, **kwargs)
  File "/srv/shop/shop/tasks.py", line 41, in charge_card
    receipt = gateway.charge(order.total, token=order.card_token)
  File "/srv/shop/shop/payments.py", line 117, in charge
    raise PaymentDeclined(reply["decline_code"])
shop.payments.PaymentDeclined: card_declined (insufficient funds)
"""


def payload(task: str, *args: object, **kwargs: object) -> str:
    return Payload(task=task, args=list(args), kwargs=kwargs, backend="default").dumps()


def new_job(task: str, *args: object, **fields: object) -> NewJob:
    kwargs = fields.pop("kwargs", {})
    return NewJob(payload=payload(task, *args, **kwargs), task=task, **fields)


def error(summary: str, path: str = "shop.payments.PaymentDeclined", tb: str = TRACEBACK) -> str:
    return json.dumps({"exception_class_path": path, "traceback": tb})


def make_dead(jobs: Jobs, queue: str, task: str = "shop.tasks.charge_card", n: int = 1) -> list[str]:
    """Dead jobs made the way a worker makes them: claimed, then failed for good."""
    jobs.enqueue_many(queue, [new_job(task, 1000 + i, kwargs={"retry": False}) for i in range(n)])
    claim = jobs.claim(queue, "seed-worker", count=n, lease_ms=60_000)
    for claimed in claim.jobs:
        jobs.retry(
            queue, claimed.id, claimed.token,
            error=error("PaymentDeclined: card_declined"),
            summary="shop.payments.PaymentDeclined: card_declined (insufficient funds)",
            give_up=True,
        )  # fmt: skip
    return [c.id for c in claim.jobs]


def make_completed(jobs: Jobs, queue: str, task: str, n: int) -> list[str]:
    jobs.enqueue_many(queue, [new_job(task, i) for i in range(n)])
    claim = jobs.claim(queue, "seed-worker", count=n, lease_ms=60_000)
    jobs.complete_many([(queue, c.id, c.token, json.dumps({"ok": True})) for c in claim.jobs])
    return [c.id for c in claim.jobs]


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


def add_worker(jobs: Jobs, worker_id: str, queues: list[str], concurrency: int, busy: int) -> None:
    now = time.time()
    info = registry.WorkerInfo(
        id=worker_id, host=worker_id.split(".")[0], pid=os.getpid() % 30000 + len(worker_id),
        queues=queues, concurrency=concurrency, running=[f"job-{i}" for i in range(busy)],
        started_at=now - 3 * 3600 - len(worker_id) * 97, last_seen=now - 1.5,
    )  # fmt: skip
    registry.heartbeat(jobs.connector, info, ttl_s=600)


def populate(jobs: Jobs) -> dict[str, list[str]]:
    """Several busy queues, a populated chart, workers; returns the dead job ids by queue."""
    dead = {}
    shape = {
        "default": ("shop.tasks.send_receipt", 38.0, 0.02),
        "emails": ("shop.tasks.send_newsletter", 64.0, 0.01),
        "payments": ("shop.tasks.charge_card", 12.0, 0.12),
        "reports": ("analytics.tasks.build_report", 3.0, 0.05),
    }
    for seed, (queue, (task, rate, failure)) in enumerate(shape.items()):
        fill_throughput(jobs, queue, rate, failure, seed)
        make_completed(jobs, queue, task, 5 + 3 * seed)
        jobs.enqueue_many(queue, [new_job(task, i, priority=i % 3) for i in range(7 * (4 - seed))])
        due = int(jobs.connector.client.time()[0]) * 1000 + 600_000 * (seed + 1)
        jobs.enqueue_many(queue, [new_job(task, i, due_ms=due + i * 60_000) for i in range(seed + 2)])
        jobs.claim(queue, f"web-{seed}.shop:{4100 + seed}", count=seed + 1, lease_ms=120_000)
    dead["payments"] = make_dead(jobs, "payments", n=4)
    dead["emails"] = make_dead(jobs, "emails", task="shop.tasks.send_newsletter", n=1)
    add_worker(jobs, "web-1.shop:4101", ["default", "emails"], 8, 5)
    add_worker(jobs, "web-2.shop:4102", ["default", "emails"], 8, 3)
    add_worker(jobs, "batch-1.shop:5120", ["payments", "reports"], 4, 4)
    return dead
