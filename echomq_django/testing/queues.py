"""What a test sees of its queues: the jobs waiting, and ``drain()`` to run them here.

``drain()`` is a worker in the test's own thread: it claims one job at a time
through the real claim script, runs it through :func:`echomq_django.execution.execute`
(the worker's path: signals, result, the task's retry rule) and records the outcome
through the real complete / retry scripts. Nothing is mocked, so what a test sees
(the TaskResult, the rows, the admin) is what production does. Being in the test's
thread, it sees the test's uncommitted rows: plain ``django_db`` is enough; each
job runs under a savepoint, so a task's failed SQL does not doom the test's
transaction (``savepoints``).

What it does not do: time limits (a run is a plain call), cancelling a running job,
and lease renewal (a claim here holds its job for an hour).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections

from .. import conf, execution, outbox, schedules
from ..compat import AnyTask, task_backends
from ..engine.jobs import Jobs
from ..engine.outcome import Failure, Success, error_object
from ..engine.retry_policy import RetryPolicy
from ..engine.scheduler import Scheduler
from ..engine.worker.lease import Lease
from ..payload import Payload
from ..relay import relay_for
from ..results import from_server_us, parse_run_after
from .savepoints import job_savepoints

WAITING = ("pending", "scheduled")
DRAIN_LIMIT = 10_000  # jobs one drain() runs at most unless told: a task that re-enqueues itself
LEASE_MS = 3600 * 1000  # a breakpoint in a task must not lose its lease
PAGE = 500


class DrainLimitReached(AssertionError):
    """``drain()`` ran DRAIN_LIMIT jobs and more were ready (a task that enqueues itself?)."""


@dataclass(frozen=True)
class QueuedJob:
    """A job as enqueued: what the code under test asked for, without running it."""

    id: str
    queue: str
    task: str  # the task's module path
    args: list[Any]
    kwargs: dict[str, Any]
    priority: int
    run_after: datetime | None  # when it may run (None: now); a retry's next attempt too
    state: str  # 'pending', 'scheduled', 'active', 'completed' or 'dead'
    attempts: int


@dataclass(frozen=True)
class RanJob:
    """One job ``drain()`` ran, and what became of it."""

    id: str
    queue: str
    task: str
    attempt: int
    outcome: str  # 'completed', 'pending' / 'scheduled' (to be retried), or 'dead'
    error: str  # the failure's summary line ('' when it completed)


def task_path(task: AnyTask | str) -> str:
    return task if isinstance(task, str) else task.module_path


def database_allowed(alias: str) -> bool:
    """Whether the running test may use the database ``alias``.

    pytest-django refuses it to a test that did not ask for it (no ``django_db``
    mark, ``db`` fixture): a cursor raises RuntimeError, or Django's
    DatabaseOperationForbidden (an AssertionError; not in the type stubs) for an
    alias left out of ``databases=``.
    """
    try:
        with connections[alias].cursor():
            return True
    except (RuntimeError, AssertionError):
        return False


class TestQueues:
    """The ``echomq`` fixture: the queues of one test, on its own flushed database."""

    __test__ = False

    def __init__(self, jobs: Jobs | None = None) -> None:
        self._jobs = jobs
        self.worker_id = f"pytest-{os.getpid()}"

    @property
    def engine(self) -> Jobs:
        """The engine API on the test database (``conf.get_jobs()``)."""
        return self._jobs or conf.get_jobs()

    def queues(self) -> list[str]:
        """The queues the configured backends use, and every queue a job was sent to."""
        from ..backends import EchoMQBackend

        names = set(self.engine.queues())
        for backend in task_backends.all():
            if isinstance(backend, EchoMQBackend):
                names.update(backend.queues or ())
        return sorted(names)

    # -- looking -----------------------------------------------------------------------

    def jobs(
        self,
        task: AnyTask | str | None = None,
        *,
        queue: str | None = None,
        states: Iterable[str] = WAITING,
    ) -> list[QueuedJob]:
        """The jobs waiting (by default) in ``queue`` (default: all), in the order they would
        run: ready ones by priority then FIFO, then the scheduled ones by due time."""
        self.relay_outbox()
        wanted = None if task is None else task_path(task)
        found = []
        for name in [queue] if queue else self.queues():
            for state in states:
                for job_id in self._ids(name, state):
                    job = self.engine.get(name, job_id)
                    if job is None or (wanted is not None and job.task != wanted):
                        continue
                    payload = Payload.loads(job.payload)
                    due = from_server_us(job.due_ms * 1000) if job.due_ms else None
                    found.append(
                        QueuedJob(
                            id=job.id,
                            queue=name,
                            task=job.task,
                            args=payload.args,
                            kwargs=payload.kwargs,
                            priority=job.priority,
                            run_after=due or parse_run_after(job.run_after),
                            state=job.state,
                            attempts=job.counted_attempts,
                        )
                    )
        return found

    def _ids(self, queue: str, state: str) -> list[str]:
        ids: list[str] = []
        while True:
            page = self.engine.page(queue, state, offset=len(ids), count=PAGE, fields=())
            ids.extend(entry.id for entry in page.entries)
            if len(page.entries) < PAGE or len(ids) >= page.total:
                return ids

    def assert_empty(self, queue: str | None = None) -> None:
        """Fail the test if any job is waiting or running (in ``queue``, default all)."""
        left = self.jobs(queue=queue, states=(*WAITING, "active"))
        if left:
            shown = "\n".join(
                f"  {j.state:9} {j.queue}: {j.task}(*{j.args!r}, **{j.kwargs!r}) id={j.id}"
                for j in left[:20]
            )
            more = f"\n  ... and {len(left) - 20} more" if len(left) > 20 else ""
            raise AssertionError(f"{len(left)} job(s) left in the queues:\n{shown}{more}")

    # -- running -----------------------------------------------------------------------

    def drain(
        self,
        *,
        queue: str | None = None,
        run_due: bool = False,
        max_jobs: int | None = None,
        reraise: bool = False,
    ) -> list[RanJob]:
        """Run ready jobs in this thread until none is left; what became of each, in order.

        ``run_due``: also jobs whose time has not come (``run_after``, a retry's
        backoff), moved to ready as the operator's "run now" does: time travel
        for the queue only, the process's clock is untouched. A task retried
        with a backoff is then run again at once, until it succeeds or is dead.
        ``max_jobs``: stop after that many. ``reraise``: the first exception a
        task raises is raised here, after its attempt is recorded as a worker
        would record it.
        """
        limit = DRAIN_LIMIT if max_jobs is None else max_jobs
        ran: list[RanJob] = []
        names = [queue] if queue else None
        with execution.in_place() as raised:
            while len(ran) < limit:
                self.relay_outbox()
                claimed = self._claim_one(names or self.queues(), run_due)
                if claimed is None:
                    return ran
                ran.append(self._run(claimed))
                if reraise and raised:
                    raise raised[0]
                raised.clear()
        if max_jobs is None and any(
            self.engine.stats(name).counts.get("pending") for name in names or self.queues()
        ):
            raise DrainLimitReached(
                f"drain() ran {DRAIN_LIMIT} jobs and more are ready (a task that enqueues "
                "itself?): pass max_jobs= to run a bounded number"
            )
        return ran

    def relay_outbox(self) -> int:
        """Send the jobs the outbox holds (ENQUEUE_ON_COMMIT="outbox"): in a test's
        transaction no commit ever relays them. None in a test that may not use the
        outbox's database (no ``django_db``): it wrote no row there, and reading the
        table would fail the test."""
        if not outbox.enabled() or not database_allowed(outbox.database()):
            return 0
        relay = relay_for(self.engine)
        return relay.drain() if relay is not None else 0

    def run_due(self, queue: str | None = None) -> int:
        """Make every scheduled job ready now (the "run now" transition); how many moved."""
        moved = 0
        for name in [queue] if queue else self.queues():
            for job_id in self._ids(name, "scheduled"):
                self.engine.run_now(name, job_id)
                moved += 1
        return moved

    def _claim_one(self, queues: list[str], run_due: bool) -> Lease | None:
        """One job, held as a worker holds it: its run's times are on the server's clock."""
        if run_due:
            for name in queues:
                self.run_due(name)
        for name in queues:
            sent = time.monotonic()
            claim = self.engine.claim(name, self.worker_id, lease_ms=LEASE_MS, start_now=1)
            if claim.jobs:
                return Lease.of_claim(claim.jobs[0], claim, sent, LEASE_MS)
        return None

    def _run(self, lease: Lease) -> RanJob:
        """The worker's handling of one claimed job, in this thread."""
        lease.begin_run(self.worker_id)
        claimed = lease.claimed
        with job_savepoints():
            outcome = execution.execute(claimed)
        ran_us = lease.ran_us()
        job = claimed.job
        task = job.task if job else ""
        if isinstance(outcome, Success):
            self.engine.complete(
                claimed.queue, claimed.id, claimed.token, outcome.result, ran_us=ran_us
            )
            return RanJob(claimed.id, claimed.queue, task, claimed.token, "completed", "")
        assert isinstance(outcome, Failure)
        used = claimed.token - (job.refunds if job else 0)
        backoff = outcome.backoff_ms
        if backoff is None:
            backoff = RetryPolicy().backoff_ms(used)
        after = self.engine.retry(
            claimed.queue,
            claimed.id,
            claimed.token,
            error=error_object(outcome.error, outcome.summary),
            summary=outcome.summary,
            backoff_ms=backoff,
            give_up=not outcome.retry,
            ran_us=ran_us,
        )
        return RanJob(claimed.id, claimed.queue, task, claimed.token, after.state, outcome.summary)

    # -- periodic schedules ---------------------------------------------------------------

    def run_schedule(self, name: str) -> str:
        """Enqueue one job of the periodic schedule ``name`` now, as its next tick would
        (the schedules declared in code are synced first). Returns the job's id."""
        declared = {s.name: s for s in schedules.declared()}
        if name not in declared:
            raise LookupError(
                f"no periodic schedule {name!r} is declared (known: {sorted(declared)})"
            )
        scheduler = Scheduler(self.engine)
        scheduler.sync(list(declared.values()))
        return scheduler.run_now(declared[name].queue, name)


__all__ = ["DrainLimitReached", "QueuedJob", "RanJob", "TestQueues"]
