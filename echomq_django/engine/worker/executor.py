"""The worker's executors: one thread per slot, each taking the next claimed job,
running it (``running.Runner``) in that thread, then ending its lease by its outcome
(``_end``); between jobs, and when it has none, it drives the worker's wire (its
claims and completions: ``driver``).

A run in a thread that outlives its soft stop (stuck in one C call) is *abandoned*:
its failure is recorded at once and a new thread takes its slot; the stuck thread
discards its outcome when the call returns, and exits.

In a supervised child worker each run is also written on the board its supervisor
reads (``link.Link``): that is how the supervisor knows what runs, for how long.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from ..errors import Cancelled, ServerUnavailable, TimeLimitExceeded
from ..jobs import Jobs
from ..outage import Outage
from ..outcome import Failure, Success
from .alarm import Alarm
from .children import Key
from .completions import Completions
from .config import WorkerConfig
from .driver import Driver
from .endings import Endings
from .lease import CANCEL_CHECK_S, STAMP_AFTER_S, Lease, running_here
from .ledger import Ledger
from .link import Link
from .running import Crashed, Runner, RunResult, stopped_failure

logger = logging.getLogger("echomq.worker")


class Executors:
    def __init__(
        self,
        jobs: Jobs,
        ledger: Ledger,
        runner: Runner,
        completions: Completions,
        endings: Endings,
        driver: Driver,
        alarm: Alarm,
        outage: Outage,
        worker_id: str,
        *,
        config: WorkerConfig,
        link: Link | None,
        stopping: threading.Event,
        give_up: threading.Event,
    ) -> None:
        self._jobs = jobs
        self._ledger = ledger
        self._runner = runner
        self._completions = completions
        self._endings = endings
        self._driver = driver
        self._alarm = alarm
        self._outage = outage
        self._worker_id = worker_id
        self._config = config
        # Supervised: the supervisor times the runs (they get no deadline here) and
        # every run is in a child process (see start.lua's ``isolated``).
        self._link = link
        self._stopping = stopping
        self._give_up = give_up
        if link is None:  # a supervised child's stuck run is its supervisor's to kill
            runner.on_abandon = self._abandon

    def start(self) -> None:
        for slot in range(self._config.concurrency):
            self._start(slot)

    def _start(self, slot: int) -> None:
        threading.Thread(
            target=self._loop, args=(slot,), name=f"echomq-exec-{slot}", daemon=True
        ).start()

    def _loop(self, slot: int) -> None:
        driver = self._driver
        while True:
            lease = self._ledger.take_now()
            if lease is None:
                if not driver.find_work():
                    return
                continue
            self._run_one(lease, slot)
            if lease.abandoned:  # its slot went to a new thread while this one was stuck
                return
            driver.between_jobs()

    def _run_one(self, lease: Lease, slot: int) -> None:
        """Run ``lease``'s job (or let it go)."""
        if self._link is None:
            # A running job is checked every second (the renewal is how a cancel reaches
            # it), and stamped once it has run STAMP_AFTER_S: the heartbeat looks then.
            # (A wake only when that is sooner than the alarm: at most one per STAMP_AFTER_S.)
            self._alarm.renew_by(min(lease.renewed_at + CANCEL_CHECK_S,
                                     time.monotonic() + STAMP_AFTER_S), wake=True)  # fmt: skip
        try:
            if self._stopping.is_set() or not self._mark_started(lease):
                self._endings.release(lease)
            elif lease.lost:
                self._endings.discard(lease)
            else:
                self._process(lease, slot)
        except BaseException:  # never lose an executor thread; the reaper recovers the job
            logger.exception("job %s: the worker failed while finishing it", lease.claimed.id)
            self._ledger.forget(lease)
        finally:
            self._ledger.end_solo(lease)

    def _mark_started(self, lease: Lease) -> bool:
        """Tell the server this job's run begins, before it runs. The claim did it for
        every job but a solo one (marked here, alone, once nothing else runs beside it).
        False: it could not be told (shutdown gave up); do not run it."""
        if lease.armed or lease.claimed.job is None:  # a corrupt row runs no task
            return True
        items = [(lease.claimed.queue, lease.claimed.id, lease.claimed.token)]
        isolated = self._link is not None or (lease.solo and self._runner.can_isolate)

        def start() -> Sequence[object]:
            return self._jobs.start_many(self._worker_id, items, isolated=isolated)

        try:
            (reply,) = self._outage.call("start", start, self._give_up)
        except ServerUnavailable:
            return False  # unmarked: the reaper returns it free
        if isinstance(reply, Exception):  # StaleToken: someone else holds it now
            lease.lost = str(reply)
        else:
            lease.armed = True
        return True

    def _process(self, lease: Lease, slot: int) -> None:
        """Run the job and end its lease."""
        lease.begin_run(self._worker_id)  # now: marking it may have taken a round trip
        lease.slot = slot
        link = self._link
        if link is not None:
            link.begin(lease)
        running_here(lease, self._stopping)
        try:
            outcome = self._runner.run(lease.key, lease.claimed, lease.solo, self._limit_s(lease))
        except (TimeLimitExceeded, Cancelled) as exc:  # a soft stop landing as the run ended
            outcome = stopped_failure(type(exc), "stopped as it ended")
        finally:
            running_here(None)
            if link is not None:
                link.end(lease)
        self._end(lease, outcome)

    def _end(self, lease: Lease, outcome: RunResult) -> None:
        """End the lease by the run's outcome."""
        lease.elapsed_ms = (time.monotonic() - lease.started) * 1000
        self._ledger.ran(lease, lease.elapsed_ms)
        if type(outcome) is Success and not (
            lease.abandoned or lease.lost or lease.released or lease.cancelled
        ):  # the common case first: this is every job's path
            self._completions.add(lease, outcome.result)
        elif lease.abandoned:
            lease.log(
                self._worker_id,
                "finally returned after it was abandoned; outcome discarded",
                outcome="late",
            )
        elif lease.lost or lease.released:
            self._endings.discard(lease)
        elif lease.cancelled and not isinstance(outcome, Success):
            self._endings.fail(lease, stopped_failure(Cancelled, lease.cancelled))
        elif isinstance(outcome, Crashed):
            self._endings.crashed(lease, outcome)
        elif isinstance(outcome, Success):
            self._completions.add(lease, outcome.result)
        else:
            self._endings.fail(lease, outcome)

    def _limit_s(self, lease: Lease) -> float:
        """Seconds the run may take here (0: no limit, or its supervisor keeps it)."""
        return 0.0 if self._link is not None else lease.limit_s

    def _abandon(self, key: Key, failure: Failure) -> None:
        """A run in a thread outlived its soft stop (stuck in C code): record its failure
        now and give its slot to a new thread; the stuck one ends when the call returns."""
        lease = self._ledger.get(key)
        if lease is None or lease.finishing:
            return
        lease.abandoned = True
        lease.stop_clock()
        logger.error(
            "job %s %s: %s; its thread is stuck", lease.claimed.id, lease.task, failure.summary
        )
        self._endings.fail(lease, failure, outside=True)  # its thread will not tell: we do
        self._start(lease.slot)
