"""The context a task that ``takes_context`` gets on an EchoMQ worker.

Django's ``TaskContext`` (the result, the attempt), and what a run may ask of the
worker running it: ``stop_requested``, true once that worker is stopping (SIGTERM, a
deploy). A long task can then save its progress and return, or raise to be retried,
before the worker's ``--grace`` runs out; past it, process mode kills the run's child
and thread mode leaves the run, and the job runs again elsewhere from its start::

    @task(takes_context=True)
    def export(context: EchoMQTaskContext, ids: list[int]) -> int:
        for done, id in enumerate(ids):
            if context.stop_requested:
                export.enqueue(ids[done:])  # the rest, on the next worker
                return done
            write(id)
        return len(ids)
"""

from __future__ import annotations

from .compat import TaskContext
from .engine.worker.lease import stop_requested


class EchoMQTaskContext(TaskContext):  # type: ignore[type-arg]  # (generic in the stubs only)
    """Django's ``TaskContext``, with the worker's stop (see the module). A subclass
    adding a property, no field: built and compared as Django's."""

    __slots__ = ()

    @property
    def stop_requested(self) -> bool:
        """The worker running this task is stopping: finish soon. Read it as often as
        you like (an ``Event`` read); False where no worker runs the task."""
        return stop_requested()


__all__ = ["EchoMQTaskContext"]
