"""Django's Tasks framework backend on the EchoMQ engine.

::

    TASKS = {
        "default": {
            "BACKEND": "echomq_django.backends.EchoMQBackend",
            "QUEUES": ["default", "emails"],        # engine queue names
            "OPTIONS": {
                "MAX_ATTEMPTS": 1,                  # runs of a task that raises (1: no retry)
                "BACKOFF": None,                    # seconds, timedelta or callable (None: the worker's)
                "TIMEOUT": None,                    # seconds a run may take (None: no limit)
                "LEASE": 30,                        # seconds a claim holds a job (None: the worker's)
                "RESULT_TTL": 86400,                # seconds a finished job's result is kept
                "DEAD_TTL": 604800,                 # seconds a failed job is kept
                "ENQUEUE_ON_COMMIT": False,         # inside atomic(): send on commit, never on rollback;
                                                    # "outbox": write it in the transaction (outbox.py)
                "TASK_MODULES": [],                 # task modules outside the installed apps
            },
        }
    }

The same job options, in lowercase, can be set per task
(``@task(max_attempts=5, backoff=30, lease=120)``, durations in seconds or as
timedelta; see :mod:`echomq_django.options` and :mod:`echomq_django.retries`);
``enqueue_on_commit`` too. ``task.using(idempotency_key="order-42")`` stores a
job once while an earlier one with that key is still pending, scheduled or
running: enqueue then returns the earlier job's result.

The backend never connects in ``__init__``: ``@task`` builds backends while a
tasks module is imported. The engine (``conf.get_jobs()``) is reached on first
enqueue or read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from functools import partial
from typing import Any, ParamSpec, TypeVar, cast

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from . import conf, outbox, tracing
from .backend_checks import configuration_problems
from .compat import (
    AnyTask,
    AnyTaskResult,
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
)
from .discovery import path_problem
from .engine.errors import InvalidJobId
from .engine.jobs import Job, NewJob
from .engine.keyspace import validate_job_id, validate_queue_name
from .engine.limits import RateLimit
from .enqueue_plan import EnqueuePlan
from .flow import TaskFlow, queue_rate_limits
from .options import DEFAULT_MAX_ATTEMPTS, JOB_OPTIONS, EchoMQTask, JobOptions
from .payload import Payload, encode_arguments
from .results import from_server_us, rebuild_task, task_result

__all__ = ["EchoMQBackend", "EchoMQTask"]

P = ParamSpec("P")
R = TypeVar("R")
K = TypeVar("K")
V = TypeVar("V")

OPTIONS_MEMO_SIZE = 1024  # Tasks remembered per backend (options, and that they are valid)


class EchoMQBackend(BaseTaskBackend):
    """Stores each enqueue as one job row (one script call); workers run them."""

    task_class = EchoMQTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        # A bad TASKS entry must not crash imports of tasks modules or `manage.py
        # check` itself: the problems are reported by check() and raised on enqueue.
        # QUEUES as written: Django's set() of a string is its letters.
        self.problems = configuration_problems(
            self.alias, self.options, params.get("QUEUES", self.queues)
        )
        if not isinstance(self.options, Mapping):  # a problem: read as no options
            self.options = {}
        self.enqueue_on_commit = outbox.commit_mode(self.options.get("ENQUEUE_ON_COMMIT", False))
        modules = self.options.get("TASK_MODULES", ())
        self.task_modules: tuple[str, ...] = (
            () if conf.task_modules_problem(modules) else tuple(modules)
        )
        self._options: dict[AnyTask, JobOptions] = {}
        self.queue_rates: dict[str, RateLimit] = {}
        self._valid: dict[tuple[AnyTask, bool], bool] = {}
        self._plans: dict[tuple[AnyTask, bool], EnqueuePlan] = {}
        self.job_options = JobOptions(max_attempts=DEFAULT_MAX_ATTEMPTS)
        if not self.problems:
            self.job_options = JobOptions.parse(
                {name: self.options.get(name.upper()) for name in JOB_OPTIONS}
            ).over(self.job_options)
            self.queue_rates = queue_rate_limits(self.options.get("RATE_LIMITS"))

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [*super().check(**kwargs), *self.problems]

    def ensure_configured(self) -> None:
        if self.problems:
            raise ImproperlyConfigured(self.problems[0].msg)

    # -- validation -----------------------------------------------------------------

    def validate_task(self, task: AnyTask) -> None:
        """Django's checks, plus a valid engine queue name, job options and idempotency key.

        A Task that passed is remembered (Django checks each Task when it is built and
        again on every enqueue). Keyed with settings.USE_TZ, the one setting Django's
        checks read; a change of TASKS builds a new backend, with an empty memo.
        """
        key = (task, settings.USE_TZ)
        try:
            if key in self._valid:
                return
        except TypeError:  # a Task subclass with an unhashable field: no memo
            self.validate_uncached(task)
            return
        self.validate_uncached(task)
        remember(self._valid, key, True)

    def validate_uncached(self, task: AnyTask) -> None:
        """Every check, every time (``validate_task`` is this, remembered)."""
        super().validate_task(task)
        key = getattr(task, "idempotency_key", None)
        commit = getattr(task, "enqueue_on_commit", None)  # None: the backend's
        try:
            validate_queue_name(task.queue_name)
            self.options_for(task)
            problem = commit is not None and conf.enqueue_on_commit_problem(
                commit, "enqueue_on_commit"
            )
            if problem:  # a typo ("Outbox") must not pick another mode
                raise ValueError(problem)
            if key is not None:  # refused by using(), not later by the engine at enqueue
                NewJob(payload="", idempotency_key=key).validate()
        except ValueError as exc:
            raise InvalidTask(str(exc)) from exc

    def options_for(self, task: AnyTask) -> JobOptions:
        """The task's job options over the backend's.

        Remembered per Task (Tasks are frozen and hashable): every enqueue and every
        failed attempt asks, and parsing them is a good part of an enqueue's cost.
        The memo is bounded: ``using(run_after=...)`` makes a new Task per call.
        """
        try:
            options = self._options.get(task)
        except TypeError:  # a Task subclass with an unhashable field: no memo
            return self.parse_options(task)
        if options is None:
            options = remember(self._options, task, self.parse_options(task))
        return options

    def parse_options(self, task: AnyTask) -> JobOptions:
        mine = JobOptions.parse({name: getattr(task, name, None) for name in JOB_OPTIONS})
        return mine.over(self.job_options)

    def plan_for(self, task: AnyTask) -> EnqueuePlan:
        """The task validated, and what its every enqueue shares (see enqueue_plan.py).

        Remembered per Task and settings.USE_TZ, as ``validate_task`` is: a plan exists
        only for a Task that passed. A Task with an unhashable field is planned each time.
        """
        key = (task, settings.USE_TZ)
        try:
            plan = self._plans.get(key)
        except TypeError:
            self.validate_uncached(task)
            return self.build_plan(task)
        if plan is None:
            self.validate_task(task)
            plan = remember(self._plans, key, self.build_plan(task))
        return plan

    def build_plan(self, task: AnyTask) -> EnqueuePlan:
        """``InvalidJobOptions`` for a bad flow option, ``InvalidTask`` for a task no worker
        could find by its path (both checked at the first enqueue: while ``@task`` builds
        the Task, its module does not hold it yet)."""
        problem = path_problem(task, self.task_modules)
        if problem:
            raise InvalidTask(problem)
        choice = getattr(task, "enqueue_on_commit", None)
        return EnqueuePlan.of(
            task,
            backend=self.alias,
            options=self.options_for(task),
            flow=TaskFlow.of(task),
            queue_rate=self.queue_rates.get(task.queue_name),
            commit_mode=self.enqueue_on_commit if choice is None else outbox.commit_mode(choice),
        )

    # -- enqueue --------------------------------------------------------------------

    def enqueue(
        self, task: Task[P, R], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> TaskResult[P, R]:
        """Validate everything, then store the job (now, or when the transaction commits)."""
        return cast("TaskResult[P, R]", self.enqueue_many(task, [(args, kwargs)])[0])

    def enqueue_many(
        self, task: AnyTask, arguments: Iterable[tuple[Sequence[Any], Mapping[str, Any]]]
    ) -> list[AnyTaskResult]:
        """Enqueue one job of ``task`` per ``(args, kwargs)``, in one round trip.

        Every job is validated before anything is sent. The engine stores up to 500
        jobs per script call, each job checked as if alone (a refused one does not
        stop the others). With ENQUEUE_ON_COMMIT inside an atomic block they are
        sent together when the transaction commits.
        """
        self.ensure_configured()
        plan = self.plan_for(task)
        arguments = list(arguments)
        with tracing.enqueue_span(task.module_path, task.queue_name, len(arguments)):
            return self.send(task, arguments, plan)

    def send(
        self,
        task: AnyTask,
        arguments: Sequence[tuple[Sequence[Any], Mapping[str, Any]]],
        plan: EnqueuePlan,
    ) -> list[AnyTaskResult]:
        """``enqueue_many`` of a validated task: now, on commit, or into the outbox."""
        prepared = [self.prepare(task, args, kwargs, plan) for args, kwargs in arguments]
        mode = plan.commit_mode
        if mode == outbox.OUTBOX and outbox.in_transaction():
            return outbox.write(type(self), prepared)  # in the caller's transaction
        if mode:
            # A job sent later is checked now: a bad one fails this call, not the commit.
            # (Sent now, the engine checks every job before it sends any.)
            max_payload = conf.get_jobs().max_payload
            for job, _ in prepared:
                job.validate(max_payload)
            # After the outermost commit of the transaction it is in (on whichever
            # database), never on its rollback; outside any, at once.
            using = outbox.transaction_database()
            if using is None:
                return self.store(prepared)
            transaction.on_commit(partial(self.store, prepared), using=using)
            return [result for _, result in prepared]
        return self.store(prepared)

    def prepare(
        self, task: AnyTask, args: Sequence[Any], kwargs: Mapping[str, Any], plan: EnqueuePlan
    ) -> tuple[NewJob, AnyTaskResult]:
        """The job to send (not yet validated) and the READY result to hand back.

        Raises on an argument that cannot be stored as JSON."""
        args, kwargs = encode_arguments(args, kwargs)
        job = plan.new_job(args, kwargs, task.run_after)
        result = TaskResult(
            task=task,
            id=job.id,
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        return job, result

    def new_job(
        self, task: AnyTask, args: list[Any], kwargs: dict[str, Any], *, traced: bool = True
    ) -> NewJob:
        """The job of one enqueue of a valid ``task`` (see ``EnqueuePlan.new_job``)."""
        return self.plan_for(task).new_job(args, kwargs, task.run_after, traced=traced)

    def store(self, prepared: Sequence[tuple[NewJob, AnyTaskResult]]) -> list[AnyTaskResult]:
        """Send the jobs (one script call each, one round trip); then ``task_enqueued`` per
        job stored (a receiver's error is logged: ``outbox.announce``).

        When an idempotency key is held by an earlier job, nothing is stored and
        the result becomes that job's result (no signal: nothing was enqueued). It
        is updated in place: on commit, the caller holds it already, and must not
        keep an id that was never stored.
        """
        if not prepared:
            return []
        queue = prepared[0][1].task.queue_name
        jobs = conf.get_jobs()
        if len(prepared) == 1:  # a plain EVALSHA: no pipeline to build for one call
            replies = [jobs.enqueue(queue, prepared[0][0])]
        else:
            replies = jobs.enqueue_many(queue, [job for job, _ in prepared])
        use_tz = settings.USE_TZ
        sent = []
        for (_, result), stored in zip(prepared, replies):
            if not stored.created:
                earlier = self.read(queue, stored.id)
                for f in fields(earlier):
                    object.__setattr__(result, f.name, getattr(earlier, f.name))
                continue
            object.__setattr__(result, "enqueued_at", from_server_us(stored.enqueued_at, use_tz))
            sent.append(result)
        outbox.announce(type(self), sent)  # every job stored first: see announce()
        return [result for _, result in prepared]

    # -- results --------------------------------------------------------------------

    def get_result(self, result_id: str) -> AnyTaskResult:
        """The job's current state as a TaskResult, from whichever of our queues holds it.

        One round trip: the row is read from every configured queue at once (a
        pipeline of HGETALLs; on a cluster, one per node holding those queues).
        """
        try:
            validate_job_id(result_id)
        except InvalidJobId as exc:
            raise TaskResultDoesNotExist(result_id) from exc
        job = self.find(result_id)
        if job is None and (outbox.enabled() or outbox.table_ready()):
            # Outbox, then the server again: a job relayed in between is found there.
            job = outbox.waiting_job(result_id, self.alias) or self.find(result_id)
        if job is None:
            raise TaskResultDoesNotExist(result_id)
        return self.to_result(job)

    def find(self, result_id: str) -> Job | None:
        """The row of ``result_id`` in whichever of our queues holds it (one round trip)."""
        return conf.get_jobs().find(self.result_queues(), result_id)

    def read(self, queue: str, result_id: str) -> AnyTaskResult:
        job = conf.get_jobs().get(queue, result_id)
        if job is None:  # finished and trimmed in between
            raise TaskResultDoesNotExist(result_id)
        return self.to_result(job)

    def result_queues(self) -> Sequence[str]:
        """The configured queues; with QUEUES empty (any queue allowed), every known queue."""
        return sorted(self.queues) if self.queues else list(conf.get_jobs().queues())

    def to_result(self, job: Job) -> AnyTaskResult:
        """The row as a TaskResult (``PayloadError`` when it names no loaded task)."""
        payload = Payload.loads(job.payload)
        return task_result(job, payload, rebuild_task(job, payload, self.task_modules))


def remember(memo: dict[K, V], key: K, value: V) -> V:
    """Store ``value`` in a bounded memo (emptied when full) and return it."""
    if len(memo) >= OPTIONS_MEMO_SIZE:
        memo.clear()
    memo[key] = value
    return value
