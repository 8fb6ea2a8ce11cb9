"""Renewing held leases: one extend call for many, and what each reply means.

A thread-mode worker's heartbeat renews its own leases, a supervisor's keeper those
of its children; both renew the same way, and differ only in how a cancel or a lost
lease reaches the run (``on_cancel``, ``on_lost``). A renewal also stamps the start
of a run that has lasted (its "started" event), and carries an operator's cancel.

While the server is away, both try again after the outage policy's wait (a fleet of
workers does not hammer a server that is restarting), capped so that a try still
comes well before the first of them must be renewed (``retry_in``: before its lease
runs out, or before its supervised child stops itself, ``board.stop_by``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from ..errors import CancelRequested, EchoMQError, ServerUnavailable, StaleToken
from ..events import EventLog
from ..jobs import Jobs
from ..outage import Outage
from .lease import Lease

logger = logging.getLogger("echomq.worker")

RETRY_MIN_S = 0.1  # the shortest wait before an unsent renewal is tried again


def renew(
    jobs: Jobs,
    due: Sequence[Lease],
    outage: Outage,
    worker_id: str,
    *,
    on_cancel: Callable[[Lease, str], None],
    on_lost: Callable[[Lease, str], None],
    renew_by: Callable[[Lease], float] | None = None,
) -> float:
    """Extend ``due`` in one round trip (stamping runs that began long enough ago).
    Returns 0.0 once the server answered; if it was unreachable (nothing was renewed),
    how long to wait before trying again (``retry_in``). ``renew_by``: when a lease
    must be renewed at the latest (monotonic; by default, when it runs out)."""
    sent = time.monotonic()
    items = [(le.claimed.queue, le.claimed.id, le.claimed.token, le.lease_ms) for le in due]
    ran_us = [le.ran_us() for le in due]
    try:
        replies = jobs.extend_many(items, ran_us=ran_us)
    except ServerUnavailable as exc:
        return retry_in(due, outage.down(exc, "extend"), sent, renew_by or lease_end)
    outage.up()  # else an outage would seem to last on, and backoffs grow
    for lease, reply, us in zip(due, replies, ran_us):
        if isinstance(reply, CancelRequested):
            if not (lease.cancelled or lease.finishing):
                lease.cancelled = str(reply) or "cancelled by an operator"
                logger.warning("job %s %s: cancelled (%s); stopping it", lease.claimed.id,
                               lease.task, lease.cancelled)  # fmt: skip
                on_cancel(lease, lease.cancelled)
        elif isinstance(reply, StaleToken):
            on_lost(lease, str(reply))
        elif isinstance(reply, Exception):
            logger.error("job %s: extend failed: %r", lease.claimed.id, reply)
        else:
            lease.renewed_at = sent
            if us >= 0 and not lease.stamped:  # a run that lasts: its start is an event
                lease.stamped = True
                lease.announce_start(worker_id)
    return 0.0


def lease_end(lease: Lease) -> float:
    """When ``lease`` runs out by this process's clock, from its last renewal (the
    server's expiry is no sooner)."""
    return lease.renewed_at + lease.lease_ms / 1000


def retry_in(
    due: Sequence[Lease], backoff_s: float, now: float, renew_by: Callable[[Lease], float]
) -> float:
    """The wait before unsent renewals are tried again: the outage's ``backoff_s``, but
    at most a quarter of the time left until the first of ``due`` must be renewed
    (``renew_by``), so the server that comes back meets a try well before then."""
    left = min(renew_by(lease) for lease in due) - now
    return max(RETRY_MIN_S, min(backoff_s, left / 4))


def send_events(jobs: Jobs, events: EventLog) -> None:
    """The job events no completion carried, in a round trip of their own. Lost with the
    server: a log for watching, not a record to keep."""
    calls = events.take()
    if calls:
        try:
            jobs.connector.run_many(calls)
        except EchoMQError as exc:
            logger.debug("job events not sent: %s", exc)
