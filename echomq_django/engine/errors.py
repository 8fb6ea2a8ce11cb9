"""Typed errors of the engine.

Every error a caller can act on has its own class; all derive from ``EchoMQError``.
Validation errors also derive from ``ValueError`` so that generic callers
(forms, URL resolvers) can treat them as bad input.
"""

from __future__ import annotations


class EchoMQError(Exception):
    """Base class of every error raised by the engine."""


class InvalidQueueName(EchoMQError, ValueError):
    """A queue name that cannot be turned into a key (raised before any key is built)."""


class InvalidJobId(EchoMQError, ValueError):
    """A job id that is not a canonical UUIDv7 (raised before any key is built)."""


class InvalidWorkerId(EchoMQError, ValueError):
    """A worker id with characters that the row's worker list cannot hold."""


class InvalidSchedule(EchoMQError, ValueError):
    """A periodic schedule that cannot be stored: its name, timing, time zone or policy."""


class InvalidURL(EchoMQError, ValueError):
    """A server URL that names no host (or no socket path); nothing was connected."""


class InvalidJobOptions(EchoMQError, ValueError):
    """An enqueue option out of range (priority, attempts, lease, payload size...)."""


class PayloadTooLarge(InvalidJobOptions):
    """The payload is bigger than the configured limit; nothing was written."""


class StaleToken(EchoMQError):
    """The lease token no longer matches: the job was reaped, re-claimed, or finished.

    The script refused the transition and changed nothing. The current holder's
    work survives a late call from a zombie worker.
    """


class CancelRequested(EchoMQError):
    """An operator cancelled the running job: its holder must stop it (extend's refusal)."""


class JobNotFound(EchoMQError, LookupError):
    """No row exists for this job id (never enqueued, removed, or trimmed)."""


class JobExists(EchoMQError):
    """A row with this id exists already; the enqueue changed nothing."""


class WrongState(EchoMQError):
    """The job is not in a state that allows this operator action."""


class ScriptError(EchoMQError):
    """A script failed on the server for a reason other than the ones above."""


class ServerUnavailable(EchoMQError, ConnectionError):
    """The server could not be reached or the connection was lost mid-call.

    After a lost connection the transition may or may not have run: the state is
    either before or after it, never half. Callers decide whether to retry.
    """


class EnqueueUnknown(ServerUnavailable):
    """An enqueue met a lost connection: its jobs may or may not be stored (the server
    may have run the script and lost only its reply). ``job_ids`` names them: look
    them up (the backend's ``get_result``, ``Jobs.get``) before enqueueing them again,
    or enqueue with an idempotency key, which makes sending them again safe."""

    def __init__(self, message: str, job_ids: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.job_ids = job_ids

    @classmethod
    def of(cls, queue: str, ids: list[str], lost: ServerUnavailable) -> EnqueueUnknown:
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        return cls(
            f"{lost}: job(s) {shown} of queue {queue} may or may not be stored; look them up "
            "by id before enqueueing them again, or enqueue with an idempotency key",
            tuple(ids),
        )


class AccessDenied(ServerUnavailable):
    """The server refused us: a wrong user or password, a missing ACL right, a TLS
    certificate it (or we) rejected.

    A ServerUnavailable, so loops that ride out outages ride this out too (access may
    be fixed while they run); a process that is starting up should stop on it instead.
    """


class ServerOutOfMemory(EchoMQError):
    """The server refused a write (maxmemory reached with noeviction); nothing was written."""


class NotDurable(EchoMQError):
    """An enqueue ran on the primary, but the durability asked for (DURABLE_ENQUEUE:
    replicas, the AOF fsync) was not confirmed in time.

    The job may or may not exist after a failover or a crash: look it up by id
    (``job_ids``) before enqueueing it again, or enqueue with an idempotency key,
    which makes sending it twice safe.
    """

    def __init__(self, message: str, job_ids: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.job_ids = job_ids


class CorruptRow(EchoMQError):
    """A row that cannot be read as a job (missing or ill-typed fields)."""


class CorruptKey(EchoMQError):
    """A key of the queue holds another type than its script needs: a place (pending,
    active, ...) that is no sorted set, a job's row that is no hash, an idempotency key
    that is no string. The script was refused before it changed anything. Every call
    that needs that key is refused the same way until an operator repairs or deletes it
    (a place: the queue's stats and pages too, they read every place); the rest goes on."""


# The classes below name failures that scripts record in a row's errors list
# (as exception_class_path); they are raised by nobody.


class LeaseExpired(EchoMQError):
    """The lease ran out before the job finished: the worker died or stalled."""


class WorkerCrashed(EchoMQError):
    """The job's worker died while the job ran alone on it (reap.lua counts these)."""


class Cancelled(EchoMQError):
    """An operator cancelled the job (raised inside a running task as its soft stop)."""


class TimeLimitExceeded(EchoMQError):
    """The task ran past its time limit (raised inside it as the soft stop)."""
