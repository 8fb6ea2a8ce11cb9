"""The ``Jobs`` sweeps: bounded per script call, looped until done (reap, promote,
trim, purge, retry_dead), so no call blocks the server for long however much there is.

An operator's action on a whole finished set (``purge``, ``retry_dead`` without ids)
acts on the set as it was when the operator asked: ``bound`` reads it (how many jobs,
the highest score, the server's clock), and every call of the action is given that
bound and a cursor (see scripts/includes/bulk.lua). The jobs that finish while it runs
are left alone, so the prompt and the result count the same jobs, no job is moved
twice by one action, and the action ends however fast workers fill the set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import script
from .bounds import DEFAULT_CRASH_BUDGET, MAX_CRASH_BUDGET, SWEEP_LIMIT, SWEEP_MAX
from .connector import Connector
from .errors import InvalidJobOptions
from .keyspace import QueueKeys, validate_job_id
from .replies import Bound, Progress, Sweep
from .validation import check_int

FINISHED = ("completed", "dead")


class Sweeps:
    """Mixed into ``Jobs``: the sweeps over its connector."""

    connector: Connector

    def reap(
        self,
        queue: str,
        *,
        limit: int = SWEEP_LIMIT,
        crash_budget: int = DEFAULT_CRASH_BUDGET,
        ended: Callable[[list[str]], None] | None = None,
    ) -> Sweep:
        """Expired leases back to pending (free unless the job crashed its worker running
        alone), or dead once such crashes reach ``crash_budget``. See reap.lua.

        ``ended`` is given the ids each bounded call moved to dead, before the next call
        (a later failure cannot lose them): no process of their task is left to report
        them. A call whose reply is lost loses its ids."""
        keys = QueueKeys.of(queue)
        check_int(limit, 1, SWEEP_MAX, "limit")
        check_int(crash_budget, 1, MAX_CRASH_BUDGET, "crash_budget")
        moved = dead = dangling = calls = 0
        reap = script.load("reap")
        while True:
            r = self.connector.run(reap, reap.keys_for(keys), [limit, crash_budget])
            moved, dead, dangling, calls = moved + r[0], dead + r[1], dangling + r[2], calls + 1
            if ended is not None and r[4]:
                ended(r[4])
            if not r[3]:
                return Sweep(moved, dead, dangling, calls)

    def promote(self, queue: str, *, limit: int = SWEEP_LIMIT) -> Sweep:
        """Due scheduled jobs to pending."""
        keys = QueueKeys.of(queue)
        check_int(limit, 1, SWEEP_MAX, "limit")
        return self._loop(script.load("promote"), keys, {}, [limit])

    def bound(self, queue: str, state: str) -> Bound:
        """The completed or dead set as it is now, for an action on all of it (its prompt's
        count); ``purge`` and ``retry_dead`` given it act on those jobs only."""
        _check_finished(state)
        keys = QueueKeys.of(queue)
        bound = script.load("bound")
        return Bound.from_reply(
            state, self.connector.run(bound, bound.keys_for(keys, state_set=state), [])
        )

    def trim(
        self,
        queue: str,
        state: str,
        *,
        purge: bool = False,
        limit: int = SWEEP_LIMIT,
        progress: Progress | None = None,
    ) -> Sweep:
        """Drop completed or dead rows past their retention (``purge``: all of them, as
        ``purge`` does: those in the set now)."""
        _check_finished(state)
        if purge:
            return self.purge(queue, state, limit=limit, progress=progress)
        keys = QueueKeys.of(queue)
        check_int(limit, 1, SWEEP_MAX, "limit")
        return self._loop(
            script.load("trim"), keys, {"state_set": state}, [limit, "now", "trimmed"], progress
        )

    def purge(
        self,
        queue: str,
        state: str,
        *,
        bound: Bound | None = None,
        limit: int = SWEEP_LIMIT,
        progress: Progress | None = None,
    ) -> Sweep:
        """Delete the completed (or dead) jobs that were in the set at ``bound`` (by
        default: now), ``limit`` per call; the jobs that finished since are kept."""
        _check_finished(state)
        keys = QueueKeys.of(queue)
        check_int(limit, 1, SWEEP_MAX, "limit")
        bound = _same_set(bound, state) or self.bound(queue, state)
        purge = script.load("purge")
        return self._bounded(purge, purge.keys_for(keys, state_set=state), [limit], bound, progress)

    def retry_dead(
        self,
        queue: str,
        job_ids: Sequence[str] = (),
        *,
        bound: Bound | None = None,
        limit: int = SWEEP_LIMIT,
        progress: Progress | None = None,
    ) -> Sweep:
        """Dead jobs back to pending with a fresh attempt budget: the given ids, or else
        every job that was dead at ``bound`` (by default: now). A job that dies again
        meanwhile stays dead: each is retried at most once.

        Given ids go ``limit`` per call, like the sweep (each id once): a script stays
        bounded however many ids an operator selects.
        """
        keys = QueueKeys.of(queue)
        check_int(limit, 1, SWEEP_MAX, "limit")
        ids = list(dict.fromkeys(validate_job_id(j) for j in job_ids))
        retry_dead = script.load("retry_dead")
        call_keys = retry_dead.keys_for(keys)
        if not ids:
            bound = _same_set(bound, "dead") or self.bound(queue, "dead")
            return self._bounded(retry_dead, call_keys, [limit, "all"], bound, progress)
        moved = refused = calls = 0
        for start in range(0, len(ids), limit):
            chunk = ids[start : start + limit]
            r = self.connector.run(retry_dead, call_keys, [limit, "ids", *chunk])
            moved, refused, calls = moved + r[0], refused + r[4], calls + 1
            if progress is not None:
                progress(Sweep(moved=moved, calls=calls, refused=refused))
        return Sweep(moved=moved, calls=calls, refused=refused)

    def _bounded(
        self,
        s: script.Script,
        keys: list[str],
        args: list[Any],
        bound: Bound,
        progress: Progress | None,
    ) -> Sweep:
        """Calls of a bulk script (purge, retry_dead 'all') over the set at ``bound``, each
        after the cursor the one before answered, until one says nothing is left."""
        moved = refused = calls = 0
        if not bound.count:  # the set was empty: nothing is the action's
            return Sweep()
        after: list[Any] = ["", ""]
        while True:
            r = self.connector.run(s, keys, [*args, bound.max_score, bound.at_us, *after])
            moved, calls, after = moved + r[0], calls + 1, [r[2], r[3]]
            refused += r[4] if len(r) > 4 else 0
            if progress is not None:
                progress(Sweep(moved=moved, calls=calls, refused=refused))
            if not r[1]:
                return Sweep(moved=moved, calls=calls, refused=refused)

    def _loop(
        self,
        s: script.Script,
        queue: QueueKeys,
        named: dict[str, Any],
        args: list[Any],
        progress: Progress | None = None,
    ) -> Sweep:
        keys = s.keys_for(queue, **named)
        moved = calls = 0
        while True:
            done, more = self.connector.run(s, keys, args)
            moved, calls = moved + done, calls + 1
            if progress is not None:
                progress(Sweep(moved=moved, calls=calls))
            if not more:
                return Sweep(moved=moved, calls=calls)


def _check_finished(state: str) -> None:
    if state not in FINISHED:
        raise InvalidJobOptions("only the completed and dead sets can be trimmed or purged")


def _same_set(bound: Bound | None, state: str) -> Bound | None:
    if bound is not None and bound.state != state:
        raise InvalidJobOptions(f"a bound of the {bound.state} set cannot bound the {state} set")
    return bound
