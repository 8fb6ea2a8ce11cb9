"""The operator actions of the EchoMQ admin: each is one engine call, hence one script.

An :class:`Action` says who may run it (the ``change`` or ``delete`` permission on
``Queue``), in which states it is offered, and whether it asks first; its ``run``
does the call and returns the message the page shows. The pages look actions up
here by the slug in their URL: an unknown slug is a 404.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import SuspiciousOperation

from ..engine.errors import WrongState
from ..engine.jobs import Bound, Jobs
from ..engine.keyspace import STATES
from ..engine.scheduler import Scheduler
from ..engine.times import from_ms
from .presenters import plural


@dataclass(frozen=True, slots=True)
class Action:
    """An operator action: who may run it, where it applies, whether it asks first."""

    slug: str
    label: str
    permission: str  # "change" or "delete" on the Queue model
    # (jobs, queue, job_id or schedule name or, for a whole set, its Bound) -> the message
    run: Callable[..., str]
    states: tuple[str, ...] = STATES  # the states (job or schedule) it is offered in
    confirm: str = ""  # non-empty: a confirmation step that says this first
    style: str = ""  # CSS class of the button


def _retry(jobs: Jobs, queue: str, job_id: str) -> str:
    if not jobs.retry_dead(queue, [job_id]).moved:
        job = jobs.get(queue, job_id)
        if job is not None and job.state == "dead":  # refused: its key is held (retry_dead.lua)
            raise WrongState(f"job {job_id} {job.last_error}")
        raise WrongState(f"job {job_id} is not dead: there is nothing to retry")
    return f"Job {job_id} moved to pending."


def _run_now(jobs: Jobs, queue: str, job_id: str) -> str:
    jobs.run_now(queue, job_id)
    return f"Job {job_id} moved to pending: it runs next."


def _cancel(jobs: Jobs, queue: str, job_id: str) -> str:
    if jobs.cancel(queue, job_id) == "cancelling":
        return (
            f"Job {job_id} is running: its worker stops it and moves it to dead (unless "
            "its run completes first: a completed run stays completed)."
        )
    return f"Job {job_id} cancelled (moved to dead; it can still be retried)."


def _delete(jobs: Jobs, queue: str, job_id: str) -> str:
    state = jobs.delete(queue, job_id)
    if state not in STATES:  # delete.lua: a row without a state, or a key of another type
        return f"Job {job_id} deleted (its row was corrupt: {state})."
    return f"Job {job_id} deleted (it was {state})."


def _retry_all_dead(jobs: Jobs, queue: str, bound: Bound) -> str:
    """The jobs dead when the operator was asked (``bound``): those that die meanwhile stay."""
    sweep = jobs.retry_dead(queue, bound=bound)
    moved = f"{plural(sweep.moved, 'job')} moved to pending."
    if sweep.refused:  # retry_dead.lua: a live job holds its idempotency key
        return f"{moved} {plural(sweep.refused, 'job')} left dead: a live job holds its key."
    return moved


def _purge(state: str) -> Callable[[Jobs, str, Bound], str]:
    def purge(jobs: Jobs, queue: str, bound: Bound) -> str:
        """The jobs in the set when the operator was asked (``bound``): later ones stay."""
        return f"{plural(jobs.purge(queue, state, bound=bound).moved, f'{state} job')} purged."

    return purge


def set_bound(jobs: Jobs, queue: str, state: str, sent: str | None) -> Bound:
    """The set a whole-set action acts on: the bound its confirmation page showed and
    sent back (``sent``: anything else is a 400), or else the set as it is now."""
    if sent is None:
        return jobs.bound(queue, state)
    try:
        return Bound.parse(state, sent)
    except ValueError as exc:  # not what the page sent: a forged or mangled form
        raise SuspiciousOperation(str(exc)) from None


def _pause(jobs: Jobs, queue: str, name: str) -> str:
    Scheduler(jobs).pause(queue, name)
    return f"Schedule {name} paused: it fires no tick until it is resumed."


def _resume(jobs: Jobs, queue: str, name: str) -> str:
    next_ms = Scheduler(jobs).resume(queue, name)
    return f"Schedule {name} resumed: it fires next at {from_ms(next_ms):%Y-%m-%d %H:%M:%S} UTC."


def _fire_now(jobs: Jobs, queue: str, name: str) -> str:
    job_id = Scheduler(jobs).run_now(queue, name)
    return f"Schedule {name}: job {job_id} enqueued."


def _remove(jobs: Jobs, queue: str, name: str) -> str:
    Scheduler(jobs).remove(queue, name)
    return f"Schedule {name} removed."


def _by_slug(*actions: Action) -> dict[str, Action]:
    return {a.slug: a for a in actions}


JOB_ACTIONS = _by_slug(
    Action("retry", "Retry", "change", _retry, states=("dead",), style="default"),
    Action("run-now", "Run now", "change", _run_now, states=("scheduled",), style="default"),
    Action("cancel", "Cancel", "change", _cancel, states=("pending", "scheduled", "active")),
    Action(
        "delete", "Delete", "delete", _delete, style="deletelink",
        confirm="The job and its row (arguments, errors, result) are removed for good. "
        "A worker still running it finds it gone and cannot complete it.",
    ),
)  # fmt: skip
QUEUE_ACTIONS = _by_slug(
    Action(
        "retry-dead", "Retry all dead", "change", _retry_all_dead, states=("dead",),
        confirm="Every dead job of this queue goes back to pending with a fresh attempt budget "
        "(jobs that die from now on stay dead).",
    ),
    Action(
        "purge-dead", "Purge dead", "delete", _purge("dead"), states=("dead",),
        style="deletelink",
        confirm="Every dead job of this queue is removed for good (jobs that die from now on "
        "are kept).",
    ),
    Action(
        "purge-completed", "Purge completed", "delete", _purge("completed"),
        states=("completed",), style="deletelink",
        confirm="Every completed job of this queue and its result are removed for good (jobs "
        "that complete from now on are kept).",
    ),
)  # fmt: skip
SCHEDULE_ACTIONS = _by_slug(
    Action("pause", "Pause", "change", _pause, states=("active",)),
    Action("resume", "Resume", "change", _resume, states=("paused",), style="default"),
    Action("run-now", "Run now", "change", _fire_now, states=("active", "paused")),
    Action(
        "remove", "Remove", "delete", _remove, states=("orphaned",), style="deletelink",
        confirm="The schedule is no longer declared in code: its record (last fire, "
        "counts) is removed for good. The jobs it fired are kept.",
    ),
)  # fmt: skip
