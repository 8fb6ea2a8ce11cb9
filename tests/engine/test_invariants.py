"""The seven invariants of /work/shared/DESIGN.md, each proven on Valkey 8 and Redis 7.

1 one transition, one script   test_each_operation_is_one_evalsha_and_nothing_else,
                               test_jobs_module_has_no_client_side_writes
2 one place                    test_one_place_after_a_seeded_random_mix,
                               test_one_place_hypothesis_state_machine
3 the fence                    test_a_zombie_is_fenced_off_and_changes_nothing
4 the server clock             test_deadlines_follow_the_server_clock_not_the_clients
5 declared keys                test_scripts_static.py (static; the cluster runtime proof
                               lives with the cluster tests)
6 nothing lost                 test_no_double_pick_across_processes,
                               test_a_killed_worker_delays_its_job_by_one_lease,
                               test_nothing_lost_under_concurrent_workers_and_reapers
7 the script cache             test_script_body_crosses_the_wire_once_per_server
"""

from __future__ import annotations

import ast
import contextlib
import multiprocessing
import random
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
    run_state_machine_as_test,
)

from echomq_django.engine import jobs as jobs_module
from echomq_django.engine import script
from echomq_django.engine.connector import Connector
from echomq_django.engine.errors import JobNotFound, StaleToken, WrongState
from echomq_django.engine.jobs import BATCH_MAX, Jobs
from echomq_django.engine.keyspace import QUEUES_KEY, STATES

from . import spawned
from .conftest import (
    QUEUE,
    WORKER,
    assert_one_place,
    dump,
    enqueue_n,
    error_json,
    members,
    new,
)

# -- 1. one transition, one script ----------------------------------------------------------


def command_calls(client) -> Counter:
    stats = client.info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): s["calls"] for name, s in stats.items()})


def calls_during(client, action) -> tuple[Counter, Counter]:
    """What the server ran while ``action`` ran: (commands clients sent, commandstats delta).

    MONITOR tells a client's own commands from the ones a script ran (tagged
    ``lua``); INFO commandstats counts both. Our own MONITOR/INFO/CONFIG/ECHO
    are left out.
    """
    marker = f"end-{uuid.uuid4()}"
    sent: Counter = Counter()
    where = client.connection_pool.connection_kwargs
    watcher = redis.Redis(host=where["host"], port=where["port"])  # connects before MONITOR
    with watcher.monitor() as monitor:
        client.config_resetstat()
        action()
        client.echo(marker)
        for event in monitor.listen():
            if marker in event["command"]:
                break
            if event["client_type"] != "lua":
                sent[event["command"].split()[0].strip('"').lower()] += 1
    watcher.close()
    stats = command_calls(client)
    for own in ("config", "config|resetstat", "info", "echo"):
        sent.pop(own, None)
        stats.pop(own, None)
    return sent, stats


def stale(call) -> None:
    with pytest.raises(StaleToken):
        call()


def _operations(jobs: Jobs):
    """(name, setup, operation): each operation is one public call of the engine."""
    q = QUEUE

    def enqueued(**fields):
        return lambda: jobs.enqueue(q, new(**fields)).id

    def claimed(lease_ms=60_000):
        def setup():
            jobs.enqueue(q, new())
            return jobs.claim(q, WORKER, lease_ms=lease_ms).jobs[0]

        return setup

    def expired():
        c = claimed(lease_ms=1)()
        time.sleep(0.005)
        return c

    def dead():
        job_id = jobs.enqueue(q, new()).id
        jobs.cancel(q, job_id)
        return job_id

    def scheduled():
        return jobs.enqueue(q, new(due_ms=2**42)).id

    def dead_bound():  # an action on a whole set is given the set as the operator saw it
        dead()
        return jobs.bound(q, "dead")

    return [
        ("enqueue", lambda: None, lambda _: jobs.enqueue(q, new())),
        ("enqueue idempotent", lambda: None, lambda _: jobs.enqueue(q, new(idempotency_key="k"))),
        ("claim", enqueued(), lambda _: jobs.claim(q, WORKER, count=5)),
        ("complete", claimed(), lambda c: jobs.complete(q, c.id, c.token)),
        (
            "retry",
            claimed(),
            lambda c: jobs.retry(q, c.id, c.token, error=error_json(), summary="x"),
        ),
        ("extend", claimed(), lambda c: jobs.extend(q, c.id, c.token, 1000)),
        ("release", claimed(), lambda c: jobs.release(q, c.id, c.token)),
        ("stale complete", claimed(), lambda c: stale(lambda: jobs.complete(q, c.id, 9))),
        ("reap", expired, lambda _: jobs.reap(q)),
        ("promote", scheduled, lambda _: jobs.promote(q)),
        ("run_now", scheduled, lambda i: jobs.run_now(q, i)),
        ("cancel", enqueued(), lambda i: jobs.cancel(q, i)),
        ("retry_dead one", dead, lambda i: jobs.retry_dead(q, [i])),
        ("bound", dead, lambda _: jobs.bound(q, "dead")),
        ("retry_dead all", dead_bound, lambda b: jobs.retry_dead(q, bound=b)),
        ("delete", enqueued(), lambda i: jobs.delete(q, i)),
        ("trim", dead, lambda _: jobs.trim(q, "dead")),
        ("purge", dead_bound, lambda b: jobs.purge(q, "dead", bound=b)),
        ("stats", lambda: None, lambda _: jobs.stats(q)),
        ("page", enqueued(), lambda _: jobs.page(q, "pending")),
    ]


@pytest.mark.parametrize("name", [op[0] for op in _operations(None)])
def test_each_operation_is_one_evalsha_and_nothing_else(standalone, jobs, redis_client, name):
    """Invariant 1: the server sees one EVALSHA per operation, and no other command."""
    _, setup, operation = next(op for op in _operations(jobs) if op[0] == name)
    for s in script.all_scripts():
        standalone.load(s)
    jobs.register_queue(QUEUE)  # the queue registry: once per process, outside every slot
    jobs.stats(QUEUE)  # the connector's connection is open (HELLO is per connection, not per call)
    arg = setup()
    sent, stats = calls_during(redis_client, lambda: operation(arg))
    assert sent == {"evalsha": 1}
    assert stats["evalsha"] == 1


@pytest.mark.parametrize(("n", "calls"), [(25, 1), (BATCH_MAX + 1, 2)])
def test_enqueue_many_is_one_evalsha_per_batch(standalone, jobs, redis_client, n, calls):
    """A bulk enqueue is one script call per BATCH_MAX jobs, and stores every job."""
    for s in script.all_scripts():
        standalone.load(s)
    jobs.register_queue(QUEUE)
    jobs.stats(QUEUE)  # the connector's connection is open
    ids: list[str] = []
    sent, stats = calls_during(redis_client, lambda: ids.extend(enqueue_n(jobs, n)))
    assert sent == {"evalsha": calls} and stats["evalsha"] == calls
    assert members(jobs)["pending"] == ids


def test_complete_many_is_one_evalsha_per_queue(standalone, jobs, redis_client):
    """A worker's flush of finished jobs: one script call per queue, each job retired."""
    for s in script.all_scripts():
        standalone.load(s)
    enqueue_n(jobs, 10)
    enqueue_n(jobs, 10, queue="other")
    held = [c for q in (QUEUE, "other") for c in jobs.claim(q, WORKER, count=10).jobs]
    items = [(c.queue, c.id, c.token, "1") for c in held]
    replies: list = []
    sent, stats = calls_during(redis_client, lambda: replies.extend(jobs.complete_many(items)))
    assert sent == {"evalsha": 2} and stats["evalsha"] == 2
    assert all(isinstance(r, int) for r in replies)
    assert members(jobs)["completed"] == sorted(c.id for c in held if c.queue == QUEUE)


def test_reads_send_no_write_command(standalone, jobs, redis_client):
    job_id = jobs.enqueue(QUEUE, new()).id
    reads = {"hgetall", "smembers", "time", "hmget"}
    for action in (lambda: jobs.get(QUEUE, job_id), jobs.queues, lambda: jobs.throughput(QUEUE)):
        sent, _ = calls_during(redis_client, action)
        assert sent and set(sent) <= reads, sent


def test_the_first_enqueue_registers_the_queue_outside_the_script(standalone, jobs, redis_client):
    """The only plain write: the registry SET, once per process (not part of a transition)."""
    for s in script.all_scripts():
        standalone.load(s)
    jobs.stats(QUEUE)  # the connector's connection is open
    sent, _ = calls_during(redis_client, lambda: jobs.enqueue(QUEUE, new()))
    assert sent == {"sadd": 1, "evalsha": 1}
    assert redis_client.smembers(QUEUES_KEY) == {QUEUE.encode()}


def test_jobs_module_has_no_client_side_writes():
    """Statically: the engine API sends no command on queue keys except through scripts.

    Every direct client call in jobs.py (and the modules of the reads and sweeps it
    mixes in) is a read, or the registry's SADD on a key outside every queue's slot.
    Adding e.g. ``client.hset(...)`` fails this test.
    """
    modules = {sys.modules[cls.__module__] for cls in jobs_module.Jobs.__mro__[:-1]}
    assert jobs_module in modules and len(modules) >= 3
    tree = ast.Module(
        body=[node for m in modules for node in ast.parse(Path(m.__file__).read_text()).body],
        type_ignores=[],
    )
    direct: Counter = Counter()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "client"
        ):
            direct[node.func.attr] += 1
            if node.func.attr == "sadd":
                assert ast.unparse(node.args[0]) == "QUEUES_KEY"
    pipelined = {
        n.func.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "pipe"
    }
    assert set(direct) <= {"sadd", "smembers", "hgetall", "time", "pipeline"}
    assert pipelined <= {"hmget", "hgetall", "execute"}  # reads only


# -- 7. the script cache ----------------------------------------------------------------------


def test_script_body_crosses_the_wire_once_per_server(standalone, url, redis_client):
    """Invariant 7: SCRIPT LOAD once per script, also with 8 threads starting cold."""
    redis_client.script_flush()
    redis_client.config_resetstat()
    jobs = Jobs(Connector.from_url(url))

    def busy(worker: str) -> None:
        for _ in range(20):
            jobs.enqueue(QUEUE, new())
            for c in jobs.claim(QUEUE, worker, count=2).jobs:
                jobs.complete(QUEUE, c.id, c.token)
            jobs.stats(QUEUE)
        jobs.cancel(QUEUE, jobs.enqueue(QUEUE, new(due_ms=2**42)).id)  # scheduled: no one claims it
        jobs.run_now(QUEUE, jobs.enqueue(QUEUE, new(due_ms=2**42)).id)
        jobs.reap(QUEUE)

    threads = [threading.Thread(target=busy, args=(f"w{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    used = {"enqueue", "claim", "complete", "stats", "cancel", "reap", "run_now"}
    stats = command_calls(redis_client)
    assert jobs.connector.script_loads == len(used) == stats["script|load"]
    assert "eval" not in stats  # the body never travels with EVAL

    redis_client.script_flush()  # mid-run: a restarted or failed-over server forgets scripts
    jobs.enqueue(QUEUE, new())
    assert jobs.connector.script_loads == len(used) + 1
    assert command_calls(redis_client)["script|load"] == len(used) + 1
    assert len(jobs.claim(QUEUE, WORKER).jobs) == 1
    assert jobs.connector.script_loads == len(used) + 2


def test_a_pipeline_after_script_flush_loads_once_and_runs_every_call(
    standalone, jobs, redis_client
):
    enqueue_n(jobs, 1)
    redis_client.script_flush()
    loads = jobs.connector.script_loads
    ids = enqueue_n(jobs, 50)
    assert jobs.connector.script_loads == loads + 1
    assert len(set(ids)) == 50 and len(assert_one_place(jobs)) == 51


# -- 6. no double pick, nothing lost ------------------------------------------------------------


def test_no_double_pick_across_processes(jobs):
    """Invariant 6: 4 processes race to claim 10,000 jobs; each job is claimed exactly once."""
    n = 10_000
    ids = set(enqueue_n(jobs, n))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(4) as pool:
        start = manager.Event()
        results = [
            pool.apply_async(
                spawned.claim_until_empty, (jobs.connector.url, QUEUE, f"p{i}", count, start)
            )
            for i, count in enumerate((1, 7, 25, 50))
        ]
        time.sleep(0.5)  # let every child connect, then start them together
        start.set()
        got = [pair for r in results for pair in r.get(timeout=120)]
    claimed = Counter(job_id for job_id, _ in got)
    assert len(got) == n and set(claimed) == ids
    assert claimed.most_common(1)[0][1] == 1
    assert {token for _, token in got} == {1}
    assert sum(1 for r in results if r.get()) > 1, "only one process claimed: no race happened"
    assert jobs.stats(QUEUE).counts["active"] == n


def test_a_killed_worker_delays_its_job_by_one_lease(jobs):
    """Invariant 6: SIGKILL a worker process mid-job; the job comes back after one lease."""
    lease = 400
    job_id = jobs.enqueue(QUEUE, new()).id
    ctx = multiprocessing.get_context("spawn")
    claimed = ctx.Event()
    doomed = ctx.Process(
        target=spawned.claim_and_hang, args=(jobs.connector.url, QUEUE, lease, claimed)
    )
    doomed.start()
    try:
        assert claimed.wait(60), "the worker process never claimed"
    finally:
        doomed.kill()
        doomed.join()
    deadline = jobs.get(QUEUE, job_id).lease_deadline
    assert jobs.reap(QUEUE).moved == 0  # still within its lease: not taken away early
    while jobs.stats(QUEUE).now_ms <= deadline:
        time.sleep(0.02)
    assert jobs.reap(QUEUE).moved == 1
    (again,) = jobs.claim(QUEUE, WORKER).jobs
    # It was running: it comes back free (no attempt counted) but solo, not yet started.
    assert (again.id, again.token, again.job.worker_ids) == (job_id, 2, ("doomed",))
    assert (again.job.solo, again.job.started, again.job.counted_attempts) == (True, False, 1)
    jobs.complete(QUEUE, job_id, again.token)
    assert assert_one_place(jobs) == {job_id: "completed"}


def test_nothing_lost_under_concurrent_workers_and_reapers(jobs):
    """Invariant 6: with crashes, zombies, retries and two reapers, enqueued = completed + dead.

    Workers claim with 40 ms leases and, per job, complete, retry, release, or
    stall past the lease and then try to complete (a zombie). Every successful
    complete is counted on the client: a job completed twice would show.
    """
    n = 300
    enqueue_n(jobs, n, max_attempts=3)
    rng_seed = 20260601
    done = threading.Event()
    completions: Counter = Counter()
    lock = threading.Lock()

    def worker(i: int) -> None:
        rng = random.Random(rng_seed + i)
        while not done.is_set():
            batch = jobs.claim(QUEUE, f"w{i}", count=rng.randint(1, 4), lease_ms=40).jobs
            if not batch:
                time.sleep(0.002)
            for c in batch:
                roll = rng.random()
                try:
                    if roll < 0.08:
                        time.sleep(0.05)  # stalls past its lease: a zombie
                    if roll < 0.65:
                        jobs.complete(QUEUE, c.id, c.token)
                        with lock:
                            completions[c.id] += 1
                    elif roll < 0.9:
                        backoff = rng.choice((0, 5))
                        jobs.retry(
                            QUEUE,
                            c.id,
                            c.token,
                            error=error_json(),
                            summary="x",
                            backoff_ms=backoff,
                        )
                    else:
                        jobs.release(QUEUE, c.id, c.token)
                except StaleToken:
                    pass

    def reaper() -> None:
        while not done.is_set():
            jobs.reap(QUEUE, limit=5)
            jobs.promote(QUEUE, limit=5)
            time.sleep(0.005)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=reaper) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        counts = jobs.stats(QUEUE).counts
        if counts["completed"] + counts["dead"] == n:
            break
        time.sleep(0.02)
    done.set()
    for t in threads:
        t.join()
    counts = jobs.stats(QUEUE).counts
    assert counts["completed"] + counts["dead"] == n, counts
    assert counts["pending"] == counts["scheduled"] == counts["active"] == 0
    assert sum(completions.values()) == counts["completed"]
    assert max(completions.values()) == 1  # no job completed twice
    metrics = jobs.stats(QUEUE).metrics
    assert metrics["enqueued"] == n
    assert metrics["completed"] + metrics["dead"] == n
    assert metrics.get("reaped", 0) + metrics.get("reaped_dead", 0) > 0, "no lease ever expired"
    assert len(assert_one_place(jobs)) == n


# -- 3. the fence -----------------------------------------------------------------------------


def test_a_zombie_is_fenced_off_and_changes_nothing(jobs):
    """Invariant 3: after the lease is lost and re-claimed, all four token calls refuse."""
    jobs.enqueue(QUEUE, new(max_attempts=5))
    zombie = jobs.claim(QUEUE, "zombie", lease_ms=1).jobs[0]
    time.sleep(0.005)
    assert jobs.reap(QUEUE).moved == 1
    holder = jobs.claim(QUEUE, "holder", lease_ms=60_000).jobs[0]
    assert holder.token == zombie.token + 1
    client = jobs.connector.client
    attempts = {
        "complete": lambda t: jobs.complete(QUEUE, zombie.id, t, '"late"'),
        "retry": lambda t: jobs.retry(
            QUEUE, zombie.id, t, error=error_json(), summary="late", give_up=True
        ),
        "extend": lambda t: jobs.extend(QUEUE, zombie.id, t, 600_000),
        "release": lambda t: jobs.release(QUEUE, zombie.id, t),
    }
    for token in (zombie.token, holder.token + 1):  # the old token, and a forged future one
        for name, call in attempts.items():
            before = dump(client)
            with pytest.raises(StaleToken, match=name):
                call(token)
            assert dump(client) == before, f"a refused {name} changed the keyspace"
    finished = jobs.complete(QUEUE, holder.id, holder.token, '"mine"')  # the holder's work survives
    for name, call in attempts.items():
        before = dump(client)
        if name == "complete":  # the holder's own complete again (a lost reply): same answer
            assert call(holder.token) == finished
        else:
            with pytest.raises(StaleToken):
                call(holder.token)  # finished: not even the last holder may move it again
        assert dump(client) == before, name
    assert jobs.get(QUEUE, holder.id).result == '"mine"'


def test_a_deleted_job_fences_its_holder(jobs):
    job_id = jobs.enqueue(QUEUE, new()).id
    c = jobs.claim(QUEUE, WORKER, lease_ms=1).jobs[0]
    time.sleep(0.01)  # its lease ran out: a running job cannot be deleted
    jobs.delete(QUEUE, job_id)
    before = dump(jobs.connector.client)
    with pytest.raises(StaleToken, match="gone"):
        jobs.complete(QUEUE, c.id, c.token)
    assert dump(jobs.connector.client) == before


# -- 4. the server clock ------------------------------------------------------------------------


def test_deadlines_follow_the_server_clock_not_the_clients(jobs):
    """Invariant 4: a client whose clock is 3 hours ahead gets server-clock deadlines."""
    shift_s, lease = 3 * 3600, 5000
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        r = pool.apply(spawned.shifted_clock_session, (jobs.connector.url, QUEUE, shift_s, lease))
    assert r["client_ms"] - r["after_retry"] > shift_s * 1000 - 60_000  # the patch took effect
    assert r["before_claim"] + lease <= r["claim_deadline"] <= r["after_claim"] + lease
    # The run's start is the claim's moment on the server's clock, as the worker measured
    # it (its monotonic clock) and stamped it with the extend: by the extend at the latest.
    assert r["before_claim"] * 1000 <= r["started_at_us"] <= (r["after_extend"] + 1) * 1000
    assert r["after_claim"] + 2 * lease <= r["extended"] <= r["after_extend"] + 2 * lease
    assert r["reaped"] == 0  # the shifted client did not expire a live lease
    assert r["after_extend"] + lease <= r["retry_due"] <= r["after_retry"] + lease
    assert r["enqueued_at_us"] <= r["started_at_us"]


# -- 2. one place -------------------------------------------------------------------------------


class Model:
    """Applies one random operation to the real queue; tracks tokens to prove they only rise."""

    OPS = ("enqueue", "schedule", "claim", "complete", "retry", "extend", "release", "reap",
           "promote", "run_now", "cancel", "retry_dead", "delete", "trim")  # fmt: skip

    def __init__(self, jobs: Jobs, queue: str, rng: random.Random) -> None:
        self.jobs, self.queue, self.rng = jobs, queue, rng
        self.ids: list[str] = []
        self.leases: list[tuple[str, int]] = []  # (id, token) as handed out, some now stale
        self.max_token: dict[str, int] = {}

    def step(self) -> str:
        op = self.rng.choice((*self.OPS, "enqueue", "claim"))  # those two twice as often
        with contextlib.suppress(StaleToken, WrongState, JobNotFound):
            getattr(self, op)()
        return op

    def _any(self) -> str:
        return self.rng.choice(self.ids)

    def _lease(self) -> tuple[str, int]:
        return self.rng.choice(self.leases)

    def enqueue(self) -> None:
        self.ids.append(
            self.jobs.enqueue(self.queue, new(priority=self.rng.randint(-2, 2), max_attempts=2)).id
        )

    def schedule(self) -> None:
        now = self.jobs.stats(self.queue).now_ms
        self.ids.append(
            self.jobs.enqueue(self.queue, new(due_ms=now + self.rng.choice((1, 50_000)))).id
        )

    def claim(self) -> None:
        lease = self.rng.choice((1, 60_000))
        for c in self.jobs.claim(
            self.queue, WORKER, count=self.rng.randint(1, 3), lease_ms=lease
        ).jobs:
            assert c.token > self.max_token.get(c.id, 0), "the token went down or repeated"
            self.max_token[c.id] = c.token
            self.leases.append((c.id, c.token))

    def complete(self) -> None:
        if self.leases:
            self.jobs.complete(self.queue, *self._lease())

    def retry(self) -> None:
        if self.leases:
            job_id, token = self._lease()
            self.jobs.retry(self.queue, job_id, token, error=error_json(), summary="x",
                            backoff_ms=self.rng.choice((0, 1, 50_000)), give_up=self.rng.random() < 0.2)  # fmt: skip

    def extend(self) -> None:
        if self.leases:
            self.jobs.extend(self.queue, *self._lease(), self.rng.choice((1, 60_000)))

    def release(self) -> None:
        if self.leases:
            self.jobs.release(self.queue, *self._lease())

    def reap(self) -> None:
        time.sleep(0.002)
        self.jobs.reap(self.queue, limit=2)

    def promote(self) -> None:
        self.jobs.promote(self.queue, limit=2)

    def run_now(self) -> None:
        if self.ids:
            self.jobs.run_now(self.queue, self._any())

    def cancel(self) -> None:
        if self.ids:
            self.jobs.cancel(self.queue, self._any())

    def retry_dead(self) -> None:
        if self.ids and self.rng.random() < 0.5:
            self.jobs.retry_dead(self.queue, [self._any()])
        else:
            self.jobs.retry_dead(self.queue, limit=2)

    def delete(self) -> None:
        if self.ids and self.rng.random() < 0.3:
            self.jobs.delete(self.queue, self._any())

    def trim(self) -> None:
        self.jobs.trim(
            self.queue, self.rng.choice(("completed", "dead")), purge=self.rng.random() < 0.2
        )


def test_one_place_after_a_seeded_random_mix(jobs):
    """Invariant 2: after every one of 300 random operations, each job is in one place."""
    model = Model(jobs, QUEUE, random.Random(7))
    ops: Counter = Counter()
    states: set[str] = set()
    for _ in range(300):
        ops[model.step()] += 1
        states |= set(assert_one_place(jobs).values())
    assert len(ops) == len(Model.OPS) and states == set(STATES), (ops, states)


class OnePlace(RuleBasedStateMachine):
    """Hypothesis drives the same operations; the invariant is checked after each."""

    jobs: Jobs
    runs = 0
    leases = Bundle("leases")

    def __init__(self) -> None:
        super().__init__()
        OnePlace.runs += 1
        self.queue = f"hyp{OnePlace.runs}"
        self.ids: list[str] = []

    @rule(priority=st.integers(-3, 3), delay=st.sampled_from([0, 1, 60_000]))
    def enqueue(self, priority, delay):
        due = self.jobs.stats(self.queue).now_ms + delay if delay else 0
        self.ids.append(
            self.jobs.enqueue(self.queue, new(priority=priority, due_ms=due, max_attempts=2)).id
        )

    @rule(target=leases, lease=st.sampled_from([1, 60_000]))
    def claim(self, lease):
        got = self.jobs.claim(self.queue, WORKER, lease_ms=lease).jobs
        return (got[0].id, got[0].token) if got else ("", 0)

    @rule(lease=consumes(leases), how=st.sampled_from(["complete", "retry", "backoff", "release"]))
    def finish(self, lease, how):
        job_id, token = lease
        if not job_id:
            return
        q = self.queue
        calls = {
            "complete": lambda: self.jobs.complete(q, job_id, token),
            "retry": lambda: self.jobs.retry(q, job_id, token, error=error_json(), summary="x"),
            "backoff": lambda: self.jobs.retry(
                q, job_id, token, error=error_json(), summary="x", backoff_ms=1
            ),
            "release": lambda: self.jobs.release(q, job_id, token),
        }
        with contextlib.suppress(StaleToken):
            calls[how]()

    @rule()
    def sweep(self):
        time.sleep(0.002)
        self.jobs.reap(self.queue)
        self.jobs.promote(self.queue)

    @rule(data=st.data(), action=st.sampled_from(["cancel", "run_now", "retry_dead", "delete"]))
    def operator(self, data, action):
        if not self.ids:
            return
        job_id = data.draw(st.sampled_from(self.ids))
        calls = {
            "cancel": lambda: self.jobs.cancel(self.queue, job_id),
            "run_now": lambda: self.jobs.run_now(self.queue, job_id),
            "retry_dead": lambda: self.jobs.retry_dead(self.queue, [job_id]),
            "delete": lambda: self.jobs.delete(self.queue, job_id),
        }
        with contextlib.suppress(WrongState, JobNotFound):
            calls[action]()

    @invariant()
    def one_place(self):
        assert_one_place(self.jobs, self.queue)


def test_one_place_hypothesis_state_machine(jobs):
    OnePlace.jobs = jobs
    run_state_machine_as_test(
        OnePlace,
        settings=settings(
            max_examples=20,
            stateful_step_count=25,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


# -- the seed's compare-and-set, through the Connector ----------------------------------------


CAS = script.Script("cas", (Path(__file__).with_name("cas.lua")).read_text())


@pytest.mark.parametrize(
    ("current", "reply", "after"),
    [("open", 1, "closed"), ("locked", 0, "locked"), (None, 0, None)],
    ids=["match-sets", "changed-skips", "absent-skips"],
)
def test_compare_and_set_from_the_seed(connector, current, reply, after):
    key = "emq:{cas}:door"
    if current is not None:
        connector.client.set(key, current)
    assert connector.run(CAS, [key], ["open", "closed"]) == reply
    assert connector.client.get(key) == after
