"""The ``Jobs`` sweeps: bounded per script call, looped until done (reap, promote,
trim, retry_dead), so no call blocks the server for long however much there is."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import script
from .bounds import DEFAULT_CRASH_BUDGET, MAX_CRASH_BUDGET, SWEEP_LIMIT, SWEEP_MAX
from .connector import Connector
from .errors import InvalidJobOptions
from .keyspace import QueueKeys, validate_job_id
from .replies import Progress, Sweep
from .validation import check_int


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

    def trim(
        self,
        queue: str,
        state: str,
        *,
        purge: bool = False,
        limit: int = SWEEP_LIMIT,
        progress: Progress | None = None,
    ) -> Sweep:
        """Drop completed or dead rows past their retention (``purge``: all of them)."""
        if state not in ("completed", "dead"):
            raise InvalidJobOptions("only the completed and dead sets can be trimmed or purged")
        keys = QueueKeys.of(queue)
        check_int(limit, 1, SWEEP_MAX, "limit")
        return self._loop(
            script.load("trim"),
            keys,
            {"state_set": state},
            [limit, "+inf" if purge else "now", "purged" if purge else "trimmed"],
            progress,
        )

    def retry_dead(
        self,
        queue: str,
        job_ids: Sequence[str] = (),
        *,
        limit: int = SWEEP_LIMIT,
        progress: Progress | None = None,
    ) -> Sweep:
        """Dead jobs back to pending with a fresh attempt budget (all of them if no ids).

        Given ids go ``limit`` per call, like the sweep: a script stays bounded
        however many ids an operator selects.
        """
        keys = QueueKeys.of(queue)
        check_int(limit, 1, SWEEP_MAX, "limit")
        ids = [validate_job_id(j) for j in job_ids]
        retry_dead = script.load("retry_dead")
        if not ids:
            return self._loop(retry_dead, keys, {}, [limit], progress)
        call_keys = retry_dead.keys_for(keys)
        moved = calls = 0
        for start in range(0, len(ids), limit):
            chunk = ids[start : start + limit]
            moved += self.connector.run(retry_dead, call_keys, [limit, *chunk])[0]
            calls += 1
            if progress is not None:
                progress(Sweep(moved=moved, calls=calls))
        return Sweep(moved=moved, calls=calls)

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
