"""Per-job accounting: a crash, a lost reply or a corrupt byte only delays a job.

Real servers, real worker processes killed by their own task, a fault proxy that
loses replies after the script ran, rows with planted bytes. Each test failed on
the accounting before it (every held job charged for its worker's death, lost
claims stranded for a lease and charged, a non-UTF-8 byte stopping the worker).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest

from echomq_django.engine.connector import Connector
from echomq_django.engine.jobs import ROW_FIELDS, Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys
from echomq_django.engine.reaper import Reaper
from echomq_django.engine.script import load
from echomq_django.engine.worker import Failure, Success, Worker, error_json
from tests.support.proxy import Fault, FaultProxy
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


def test_a_crashing_task_takes_none_of_its_batch_mates_with_it(valkey_jobs, valkey_url, spawn):
    """The crasher is claimed with healthy jobs (one claim, all four started at once) and
    kills its worker's process; the worker is restarted after its death. Every healthy
    job completes with one counted attempt; the crasher, back solo, runs in a child
    process of its own, whose deaths the worker charges to it: dead after three."""
    jobs = valkey_jobs
    specs = [{"sleep": 0.2}] * 2 + [{"crash": 3}] + [{"sleep": 0.2}] * 5
    ids = [jobs.enqueue("q", NewJob(payload=json.dumps(s), task="t")).id for s in specs]
    crasher, healthy = ids[2], ids[:2] + ids[3:]
    spawn("reaper", valkey_url, "q", "--interval", "0.05")
    deaths = 0

    def settled() -> bool:
        return all(jobs.get("q", i).state in ("completed", "dead") for i in ids)

    deadline = time.monotonic() + 60
    while not settled():
        assert time.monotonic() < deadline, "the jobs did not settle within 60 s"
        worker = spawn("worker", valkey_url, "q", "--concurrency", "4", "--lease-ms", "400")
        while worker.popen.poll() is None and not settled():
            time.sleep(0.02)
        if worker.popen.poll() is not None:
            assert worker.popen.returncode == 3, worker.log()  # only the crasher kills it
            deaths += 1
        worker.kill()
    for job_id in healthy:
        job = jobs.get("q", job_id)
        assert (job.state, job.counted_attempts, job.error_list) == ("completed", 1, []), job
    dead = jobs.get("q", crasher)
    assert (dead.state, dead.crashes) == ("dead", 3)
    assert [e["exception_class_path"] for e in dead.error_list] == [
        "echomq_django.engine.errors.WorkerCrashed"
    ] * 3
    # Once beside others (the worker died: it comes back solo), then three times in its
    # own child (the worker saw each and charged it): the budget.
    assert deaths == 1
    assert "crashed: its process died (exit status 3)" in worker.log()


def _sha_marker(name: str) -> bytes:
    return load(name).sha.encode()


def _keep_losing(proxy: FaultProxy, script: str, times: int, stop: threading.Event) -> Counter:
    """Lose the reply of the next ``times`` calls of ``script`` (it ran; the caller saw a cut)."""
    lost: Counter[str] = Counter()
    for _ in range(times):
        fired = proxy.arm(Fault.DROP_REPLY, match=_sha_marker(script))
        while not (fired.wait(0.05) or stop.is_set()):
            pass
        if stop.is_set():
            break
        lost[script] += 1
    proxy.disarm()
    return lost


@pytest.fixture
def proxy(valkey_server):
    with FaultProxy(valkey_server.host, valkey_server.port) as p:
        yield p


@pytest.mark.parametrize("script", ["claim", "complete"])
def test_lost_replies_cost_no_job_an_attempt_nor_a_lease(valkey_jobs, proxy, script):
    """Replies of claims (the jobs were leased) or completes (the jobs were finished) are
    lost again and again, with the default attempt settings: every job completes once,
    none is charged, none waits for its lease to run out."""
    jobs, n, lease_ms = valkey_jobs, 300, 20_000
    jobs.enqueue_many("q", [NewJob(payload=str(i)) for i in range(n)])
    runs: Counter[str] = Counter()

    def handler(claimed):
        runs[claimed.id] += 1
        return Success('"ok"')

    connector = Connector.from_url(proxy.url, socket_timeout=0.5)
    worker = Worker(Jobs(connector), ["q"], handler, concurrency=2, lease_ms=lease_ms, burst=True)
    stop = threading.Event()
    lost: Counter[str] = Counter()
    chaos = threading.Thread(target=lambda: lost.update(_keep_losing(proxy, script, 5, stop)))
    chaos.start()
    started = time.monotonic()
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    wait_until(lambda: jobs.stats("q").counts["completed"] == n, timeout=lease_ms / 1000 - 5)
    took = time.monotonic() - started
    stop.set()
    chaos.join()
    worker.stop()
    thread.join(10)
    connector.close()
    assert lost[script] >= 1, "no reply was lost"
    assert took < lease_ms / 1000 / 2, f"{took:.1f}s: some job waited for its lease"
    counts = jobs.stats("q").counts
    assert counts == {"pending": 0, "scheduled": 0, "active": 0, "completed": n, "dead": 0}
    assert set(runs.values()) == {1}, "a job ran twice"
    for c in jobs.page("q", "completed", count=500, fields=("attempts", "refunds")).entries:
        assert int(c.fields["attempts"] or 0) - int(c.fields["refunds"] or 0) == 1


# Fields read as data before the task runs: a planted byte there must end the row.
READ_AS_DATA = {"payload", "priority", "attempts", "refunds", "max_attempts", "lease_ms",
                "enqueued_at", "started_at", "last_attempted_at", "finished_at", "due_ms",
                "result_ttl_ms", "timeout_ms", "crashes"}  # fmt: skip


def parse_payload(claimed):
    """What every real handler does first (the Django layer's payload check): a payload
    that is not JSON is refused for good, not retried."""
    try:
        json.loads(claimed.job.payload)
    except ValueError:
        return Failure(error_json("x.PayloadError", "not JSON"), "PayloadError: not JSON", False)
    return Success("1")


@pytest.mark.parametrize("field", ROW_FIELDS)
def test_a_non_utf8_byte_in_any_field_ends_that_row_alone(valkey_jobs, field):
    """One row with byte 0xff in ``field`` among healthy ones: the reply still parses (the
    byte comes back escaped), so the batch is not lost; a row whose data cannot be read
    ends dead with its reason; the others complete; the worker keeps serving."""
    jobs = valkey_jobs
    ids = [jobs.enqueue("q", NewJob(payload=json.dumps(i))).id for i in range(6)]
    planted = ids[2]
    key = QueueKeys.of("q").job(planted)
    jobs.connector.client.hset(key, field, b'{"a": "\xff"}' if field == "payload" else b"1\xff")
    worker = Worker(jobs, ["q"], parse_payload, concurrency=2, burst=True)
    stats = worker.run()
    assert worker.fatal is None
    for job_id in ids:
        if job_id != planted:
            assert jobs.connector.client.hget(QueueKeys.of("q").job(job_id), "state") == "completed"
    state = jobs.connector.client.hget(key, "state")
    last_error = jobs.connector.client.hget(key, "last_error") or ""
    if field in READ_AS_DATA:
        assert state == "dead", (state, last_error)
        assert "CorruptRow" in last_error or "PayloadError" in last_error, last_error
        if "CorruptRow" in last_error and field != "attempts":
            assert field in last_error, last_error
    else:
        assert state in ("completed", "dead"), state
    assert stats.completed >= 5


def test_a_fatal_error_in_claiming_stops_the_worker_with_a_reason(valkey_jobs, monkeypatch):
    jobs = valkey_jobs

    def broken(*args, **kwargs):
        raise TypeError("a bug, not an outage")

    monkeypatch.setattr(jobs, "claim_call", broken)
    worker = Worker(jobs, ["q"], lambda c: Success("1"), idle_block_s=0.2)
    worker.run()
    assert worker.fatal and "TypeError: a bug, not an outage" in worker.fatal


def test_the_reaper_returns_a_dead_workers_read_ahead_free_and_in_order(valkey_jobs):
    """A worker held eight jobs and had started two when it died: the six it never ran
    go back free, not solo; the two that ran come back solo, first, in their order."""
    jobs = valkey_jobs
    ids = [jobs.enqueue("q", NewJob(payload="{}")).id for _ in range(8)]
    jobs.claim("q", "gone", count=8, lease_ms=1, start_now=2)
    time.sleep(0.005)
    (sweep,) = Reaper(jobs, ["q"], discover=False).tick()
    assert sweep.reaped.moved == 8
    rows = [jobs.get("q", i) for i in ids]
    assert [r.solo for r in rows] == [True] * 2 + [False] * 6
    assert all(r.counted_attempts == 0 and r.error_list == [] for r in rows)
    order = [jobs.claim("q", "w", count=8).jobs for _ in range(3)]
    assert [[c.id for c in claim] for claim in order] == [[ids[0]], [ids[1]], ids[2:]]


def test_a_start_sent_again_after_a_lost_reply_marks_the_run_once(valkey_jobs):
    """A solo job is marked started by its own call (start.lua); sent again after a lost
    reply, it must not count a second run (one worker id per run)."""
    jobs = valkey_jobs
    job_id = jobs.enqueue("q", NewJob(payload="{}")).id
    (c,) = jobs.claim("q", "w").jobs  # not marked at claim (start_now=0)
    assert jobs.start_many("w", [("q", job_id, c.token)]) == [1]
    assert jobs.start_many("w", [("q", job_id, c.token)]) == [1]  # the same call again
    job = jobs.get("q", job_id)
    assert (job.worker_ids, job.started) == (("w",), True)
