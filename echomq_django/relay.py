"""The outbox relay: committed outbox rows -> the server, each job exactly once.

A batch is: take up to ``batch`` rows that are due, send them with the engine's
bulk enqueue (``Jobs.enqueue_many``, one script call per 500 jobs, one round trip),
delete them. The job id is the row's, so a relay that dies after the send and
before the delete costs nothing: the next relay sends the row again, the enqueue
script answers "exists" (``JobExists``), and the row is deleted.

Several relays may run at once (every ``runreaper`` runs one):

- where the database has ``SELECT ... FOR UPDATE SKIP LOCKED`` (PostgreSQL, MySQL
  8, MariaDB 10.6, Oracle) a batch is taken under row locks inside a transaction
  that also deletes it: a relay that dies releases its rows with its connection;
- elsewhere (SQLite) a batch is leased: ``available_at`` is pushed ``lease_s``
  ahead with a token in ``lease``, by one conditional UPDATE; a relay that dies
  leaves its rows to the next one when the lease ends.

A row the server refuses (bad options, a planted key of the wrong type) is kept,
with its error and a growing back-off: nothing accepted is lost, and the outbox
backlog (admin, metrics, ``echomq stats``) shows it. An idle relay polls every
``interval_s`` (one indexed query): a job committed while the relay is idle
reaches the server after half that on average, at most all of it plus one batch.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta

from django.db import Error as DatabaseError
from django.db import connections, transaction
from django.db.models import QuerySet
from django.utils import timezone

from . import outbox
from .engine.error_record import storable
from .engine.errors import EchoMQError, JobExists, ServerOutOfMemory, ServerUnavailable
from .engine.jobs import BATCH_MAX, Jobs, NewJob
from .engine.keyspace import validate_queue_name
from .engine.outage import Outage
from .models import OutboxJob

logger = logging.getLogger("echomq.relay")

DEFAULT_INTERVAL_S = 0.1
DORMANT_INTERVAL_S = 2.0  # no known task uses the outbox: a cheap look now and then
DEFAULT_LEASE_S = 30.0
MAX_BACKOFF_S = 60.0  # the longest wait before a refused row, or a lost server, is tried again
MAX_ATTEMPTS = 2**31 - 1  # the most OutboxJob.attempts holds on every database Django supports
# Whole-call failures: the batch stops, its rows stay, the relay backs off.
TRANSIENT = (ServerUnavailable, ServerOutOfMemory, DatabaseError)


class Relay:
    """Moves committed outbox rows to the server, ``batch`` rows per step."""

    def __init__(
        self,
        jobs: Jobs,
        *,
        batch: int = BATCH_MAX,
        interval_s: float = DEFAULT_INTERVAL_S,
        lease_s: float = DEFAULT_LEASE_S,
        using: str | None = None,
    ) -> None:
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 10_000:
            raise ValueError(f"batch must be an integer between 1 and 10000, not {batch!r}")
        if not interval_s > 0 or not lease_s > 0:
            raise ValueError("interval_s and lease_s must be > 0")
        self.jobs = jobs
        self.batch = batch
        self.interval_s = interval_s
        self.lease_s = lease_s
        self.using = using or outbox.database()
        # Called with the sent ids after the send and before the delete: the crash
        # window that the job id makes harmless (tests kill a relay there).
        self.after_send: Callable[[list[str]], None] = lambda ids: None
        self.relayed = 0  # rows sent and deleted by this relay
        self.resent = 0  # of them, jobs the server had already (a relay died before its delete)
        self._stopping = threading.Event()

    @property
    def locks_rows(self) -> bool:
        """True where the database can skip rows locked by another relay."""
        return connections[self.using].features.has_select_for_update_skip_locked

    # -- one step ---------------------------------------------------------------------

    def step(self) -> int:
        """Relay one batch; the number of rows taken (0: nothing was due)."""
        if self.locks_rows:
            with transaction.atomic(using=self.using):
                rows = list(self.due_rows().select_for_update(skip_locked=True)[: self.batch])
                self.finish(rows)
            return len(rows)
        rows = self.lease()
        try:
            self.finish(rows)
        except TRANSIENT:
            # Free the lease at once: the rows go again after the back-off, not the lease.
            self.rows(row.id for row in rows).filter(lease=rows[0].lease).update(
                lease="", available_at=timezone.now()
            )
            raise
        return len(rows)

    def due_rows(self) -> QuerySet[OutboxJob]:
        """Rows a relay may take now, in the order of the index (available_at, id)."""
        return (
            OutboxJob.objects.using(self.using)
            .filter(available_at__lte=timezone.now())
            .order_by("available_at", "id")
        )

    def rows(self, ids: Iterable[str]) -> QuerySet[OutboxJob]:
        return OutboxJob.objects.using(self.using).filter(pk__in=list(ids))

    def lease(self) -> list[OutboxJob]:
        """Take up to ``batch`` due rows for ``lease_s`` (no row locks: SQLite).

        The UPDATE only takes rows still due, so two relays that read the same ids
        split them: each row is leased by one of them.
        """
        now = timezone.now()
        ids = list(self.due_rows().values_list("id", flat=True)[: self.batch])
        if not ids:
            return []
        token = uuid.uuid4().hex
        self.rows(ids).filter(available_at__lte=now).update(
            lease=token, available_at=now + timedelta(seconds=self.lease_s)
        )
        return list(self.rows(ids).filter(lease=token).order_by("id"))  # the enqueue order

    def finish(self, rows: Sequence[OutboxJob]) -> None:
        """Send ``rows``, then delete the sent ones and hold back the refused ones."""
        if not rows:
            return
        sent, refused = self.send(rows)
        self.after_send(sent)
        if sent:
            self.rows(sent).delete()
            self.relayed += len(sent)
        for row in rows:
            if row.id in refused:
                self.hold_back(row, refused[row.id])

    def send(self, rows: Sequence[OutboxJob]) -> tuple[list[str], dict[str, str]]:
        """Enqueue the rows (bulk, per queue): the ids now on the server, and the refused
        ones with why. ``ServerUnavailable`` (and other whole-call failures) propagate."""
        sent: list[str] = []
        refused: dict[str, str] = {}
        by_queue: dict[str, list[NewJob]] = {}
        for row in rows:
            try:
                job = outbox.to_new_job(row).validate(self.jobs.max_payload)
                validate_queue_name(row.queue)
            except (ValueError, TypeError) as exc:
                refused[row.id] = f"the row cannot be a job: {exc}"
                continue
            by_queue.setdefault(row.queue, []).append(job)
        for queue, jobs in by_queue.items():
            try:
                self.jobs.enqueue_many(queue, jobs)
                sent += [job.id for job in jobs]
            except TRANSIENT:
                raise
            except EchoMQError:
                # One refusal (most often JobExists: a relay died after sending these)
                # is raised for the whole call; the others were stored. Sort them out
                # one by one: "exists" means sent.
                for job in jobs:
                    try:
                        self.jobs.enqueue(queue, job)
                    except JobExists:
                        self.resent += 1
                    except TRANSIENT:
                        raise
                    except EchoMQError as exc:
                        refused[job.id] = f"{type(exc).__name__}: {exc}"
                        continue
                    sent.append(job.id)
        return sent, refused

    def hold_back(self, row: OutboxJob, error: str) -> None:
        """Keep a refused row, with its error, a growing back-off ahead.

        Nothing here may fail on what the row holds: a failure undoes the batch (on
        PostgreSQL its whole transaction, the sent rows' deletes too), and the row,
        still the oldest due one, would fail every batch after it. So the count stops
        at what the column holds (a row planted at its most), the power at a size past
        the ceiling (2.0**1024 overflows), and the error is text any database stores
        (a planted option's name may be a lone surrogate or a NUL)."""
        attempts = min(row.attempts, MAX_ATTEMPTS - 1) + 1
        delay = min(MAX_BACKOFF_S, 2.0 ** min(attempts, 32))
        logger.error("outbox job %s (queue %s) refused: %s", row.id, row.queue, error)
        self.rows([row.id]).update(
            attempts=attempts,
            last_error=storable(error, 2000).replace("\x00", "\\x00"),
            lease="",
            available_at=timezone.now() + timedelta(seconds=delay),
        )

    # -- the loop ---------------------------------------------------------------------

    def drain(self) -> int:
        """Relay until nothing is due; the number of rows taken."""
        total = 0
        while n := self.step():
            total += n
        return total

    def run(self) -> None:
        """Relay until ``stop()``: full batches back to back, then a poll every ``interval_s``.

        A lost server or database is ridden out with a growing back-off; so is an
        unexpected error (logged with its traceback), so that one bad batch never ends
        the relay thread while its process goes on looking healthy.
        """
        logger.info(
            "outbox relay on database %r: batches of %d, polling every %gs",
            self.using,
            self.batch,
            self.interval_s,
        )
        outage = Outage(
            logger, ceiling_s=MAX_BACKOFF_S, lost="outbox relay paused", back="outbox relay resumed"
        )
        while not self._stopping.is_set():
            try:
                taken = self.step()
            except TRANSIENT as exc:
                if isinstance(exc, DatabaseError):
                    connections[self.using].close()  # a fresh connection on the next try
                self._stopping.wait(outage.down(exc))
                continue
            except Exception as exc:  # a bug: said loudly, and the relay goes on (backing off)
                logger.exception("outbox relay: a batch failed")
                self._stopping.wait(outage.down(exc))
                continue
            outage.up()
            if taken:
                logger.info("outbox: %d job(s) relayed", taken)
            if taken < self.batch:
                self._stopping.wait(self.interval_s)

    def start(self) -> threading.Thread:
        """``run()`` in a daemon thread (its own database connection, closed at the end)."""

        def target() -> None:
            try:
                self.run()
            finally:
                connections[self.using].close()

        thread = threading.Thread(target=target, name="echomq-relay", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Finish the current batch and return from ``run``. Safe from a signal handler."""
        self._stopping.set()


def relay_for(jobs: Jobs) -> Relay | None:
    """The relay a long-running command should run: None when there is no outbox table.

    Where no known task uses the outbox, but its table exists, it still relays, every
    ``DORMANT_INTERVAL_S``: a task the discovery cannot see may write rows there
    (``outbox.table_ready``), and once committed they must reach the server."""
    if outbox.enabled():
        return Relay(jobs)
    return Relay(jobs, interval_s=DORMANT_INTERVAL_S) if outbox.table_ready() else None


__all__ = ["Relay", "relay_for"]
