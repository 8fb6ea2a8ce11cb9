"""A drained job's failed SQL stays its own: one savepoint per job.

A worker runs each job in autocommit, where a statement that fails leaves the next
one working. ``drain()`` runs jobs inside the test's transaction instead, where a
failed write dooms it: Django marks the transaction for rollback when an ORM write
fails in it (a ``save()`` or ``create()`` refused with an ``IntegrityError``, even
one the task catches), and PostgreSQL aborts it at any refused statement. Every
query after it, the test's own assertions included, then fails ("An error occurred
in the current transaction", "current transaction is aborted").

So each job runs under a savepoint on every connection that is inside a
transaction. The savepoint is released when the job leaves the transaction usable
(its writes stay, as a worker's would) and rolled back to when it does not (the
failed job's writes go with it; autocommit would have kept those made before the
failing statement). What cannot be made as under a worker: within the job, a query
after its own failed write fails too. A test that counts queries around ``drain()``
sees each job's two savepoint statements.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

# libpq's PQTRANS_INERROR: psycopg 3's TransactionStatus.INERROR and psycopg2's
# TRANSACTION_STATUS_INERROR, read from either driver's ``connection.info``.
IN_FAILED_TRANSACTION = 3


@contextmanager
def job_savepoints() -> Iterator[None]:
    """Run the body (one job) under a savepoint on each transaction open here."""
    held = [
        (connection, connection.savepoint())
        for connection in connections.all(initialized_only=True)
        if connection.in_atomic_block
    ]
    try:
        yield
    finally:
        for connection, sid in held:
            if sid is not None:  # None: the database takes no savepoints
                settle(connection, sid)


def settle(connection: BaseDatabaseWrapper, sid: str) -> None:
    """Release the job's savepoint, or roll back to it if the job left the transaction
    unusable; as Django's ``atomic()`` settles its own, down to the failure of both."""
    try:
        if aborted(connection) or connection.needs_rollback:
            connection.needs_rollback = False
            connection.savepoint_rollback(sid)
        connection.savepoint_commit(sid)
    except DatabaseError:
        # The transaction cannot be saved here (the task closed the connection, say):
        # the test's own transaction fails, as Django's atomic() would make it.
        connection.needs_rollback = True


def aborted(connection: BaseDatabaseWrapper) -> bool:
    """Whether PostgreSQL aborted the connection's transaction at a failed statement
    (read from the driver: no query sent to know). Other databases do not abort one."""
    if connection.vendor != "postgresql" or connection.connection is None:
        return False
    return int(connection.connection.info.transaction_status) == IN_FAILED_TRANSACTION
