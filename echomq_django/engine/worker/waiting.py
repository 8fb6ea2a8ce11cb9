"""The idle wait: when no queue has work, an executor blocks on the server until an
enqueue wakes it (BZPOPMIN on the queues' wake keys, on a connection of its own) or
the next scheduled job is due. It never polls in a sleep loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..connector import Connector
from ..errors import EchoMQError
from ..jobs import Jobs
from ..keyspace import QueueKeys

logger = logging.getLogger("echomq.worker")

BLOCK_SLACK_S = 2.0  # socket_timeout = block timeout + this: a hung read cannot wedge us
# A cluster's blocking read ended (or refused) on a node that no longer serves its slot.
REDIRECTS = (redis.exceptions.MovedError, redis.exceptions.ReadOnlyError)
REDIRECTED_WAIT_S = 0.05
DOWN_WAIT_S = 1.0


class IdleWait:
    """The worker's wait for work, on a single server or a cluster."""

    def __init__(
        self, jobs: Jobs, queues: Sequence[str], block_s: float, stopping: threading.Event
    ) -> None:
        self._jobs = jobs
        self._keys = [QueueKeys.of(q).wake for q in queues]
        self._block_s = block_s
        self._stopping = stopping
        self._cut = False  # cut(): the wait ends now, not after its timeout
        self._blocker: redis.Redis | None = None
        self._blocking_since: float | None = None  # for the watchdog
        self.waiting = False
        # On a cluster one blocking call cannot span the queues' slots: a waiter per queue.
        self._waiters = (
            QueueWaiters(jobs.connector, queues, block_s + BLOCK_SLACK_S)
            if jobs.connector.is_cluster
            else None
        )

    def block(
        self,
        next_due: tuple[int, str] | None,
        queues: Sequence[str] = (),
        *,
        at_most_s: float | None = None,
    ) -> None:
        """Wait on the server until a queue (of ``queues``, default all) is woken or the
        next scheduled job is due, or until ``cut``.

        A server checks blocking timeouts only on its ``hz`` tick (100 ms by
        default), too coarse for a due time. So when a scheduled job is due before
        the block would end anyway, a local alarm promotes it at its time
        (``Jobs.promote``, one script call), and the promotion's wake-up ends the
        block: the job starts within a few ms of due, without a reaper.
        """
        timeout, alarm = self._block_s, None
        if at_most_s is not None:
            timeout = min(timeout, at_most_s)
        if next_due is not None and next_due[0] / 1000 < timeout:
            wait_ms, queue = max(next_due[0], 0), next_due[1]
            timeout = max(wait_ms, 1) / 1000
            alarm = threading.Timer((wait_ms + 1) / 1000, self._promote, (queue,))
            alarm.daemon = True
            alarm.start()
        keys = [QueueKeys.of(q).wake for q in queues] or self._keys
        self.waiting = True
        try:
            if self._waiters is not None:
                self._waiters.wait(timeout, keys)
                return
            self._blocking_since = time.monotonic()
            self._bzpopmin(keys, timeout)
        except Exception as exc:
            if self._stopping.is_set() or self._cut:
                # Our own stop or cut closed the connection under the call. redis-py
                # does not expect that from another thread: besides a ConnectionError
                # it can fail with whatever it met half-closed (a TypeError from a
                # poll of a socket gone None). The wait is over either way.
                return
            if not isinstance(exc, redis.RedisError):
                raise
            # Down, failed over, or refused (e.g. an ACL without BZPOPMIN): wait
            # out the timeout instead, so a broken blocking read never spins.
            logger.debug("blocking wait failed (%s); waiting %.2fs instead", exc, timeout)
            self.close()
            self._stopping.wait(timeout)
        finally:
            self.waiting = False
            self._cut = False
            self._blocking_since = None
            if alarm is not None:
                alarm.cancel()

    def _bzpopmin(self, keys: Sequence[str], timeout: float) -> None:
        """One BZPOPMIN on the blocking connection that no ``cut`` can miss.

        ``cut`` sets its flag, then closes the connection. A cut before the command is
        sent is seen by the check after it (redis-py sends on a fresh connection when
        the one it had was closed, and that read would block for the whole timeout);
        a cut after that check closes the socket the read is on, and the read fails.
        """
        pool = self._blocking_client().connection_pool
        connection = pool.get_connection()
        try:
            connection.send_command("BZPOPMIN", *keys, timeout)
            if self._stopping.is_set() or self._cut:
                connection.disconnect()  # the reply is not read: the connection is done
                return
            connection.read_response()
        finally:
            pool.release(connection)

    def watchdog(self, now: float) -> None:
        """Cut a blocking read that outlived its own timeout (a half-open connection)."""
        since = self._blocking_since
        if since is not None and now - since > self._block_s + 2 * BLOCK_SLACK_S:
            logger.warning("a blocking read hung for %.1fs; reconnecting", now - since)
            self.interrupt()

    def interrupt(self) -> None:
        """``cut``, and on a cluster cut its per-queue blocking reads too: a stop, or a
        read the watchdog found hung."""
        if self._waiters is not None:
            self._waiters.interrupt()
        self.cut()

    def cut(self) -> None:
        """End the current (or the next) wait now: the worker got room for queues it was
        not waiting for. The blocking connection is cut, and opened again by the next wait."""
        self._cut = True
        if self._waiters is not None:
            self._waiters.cut()
        blocker = self._blocker
        if blocker is not None:
            blocker.connection_pool.disconnect()

    def close(self) -> None:
        if self._waiters is not None:
            self._waiters.close()
        blocker, self._blocker = self._blocker, None
        if blocker is not None:
            blocker.close()

    def _promote(self, queue: str) -> None:
        try:
            self._jobs.promote(queue, limit=100)
        except EchoMQError as exc:  # the block's own timeout still ends the wait
            logger.debug("promote at due time failed: %s", exc)

    def _blocking_client(self) -> redis.Redis:
        """A client of our own for blocking reads, whose socket times out after the block."""
        if self._blocker is None:
            self._blocker = blocking_client(
                self._jobs.connector.client,
                self._keys[0],
                socket_timeout=self._block_s + BLOCK_SLACK_S,
            )
        return self._blocker


def blocking_client(
    client: redis.Redis | redis.RedisCluster, key: str, *, socket_timeout: float
) -> redis.Redis:
    """A one-connection client like ``client`` (for ``key``'s node on a cluster).

    Blocking reads get their own connection so they never hold one that scripts
    need, and a socket timeout just above the block timeout, so a read that a
    failover left hanging fails instead of waiting for ever.
    """
    if isinstance(client, redis.RedisCluster):
        node = client.get_node_from_key(key)
        pool = node.redis_connection.connection_pool
    else:
        pool = client.connection_pool
    kwargs = dict(pool.connection_kwargs)
    kwargs.update(socket_timeout=socket_timeout, retry=Retry(NoBackoff(), 0))
    return redis.Redis(
        connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
    )


class QueueWaiters:
    """The idle wait on a cluster: a thread per queue blocks on that queue's wake key.

    One BZPOPMIN over the wake keys of several queues is a CROSSSLOT error on a
    cluster (each queue is its own slot), so each queue gets a thread with its own
    connection to the queue's node, and ``wait`` returns as soon as any of them is
    woken: pick-up stays as fast as one blocking call on a single server.

    The threads block only while the worker waits. A wake-up one of them still
    takes after the worker went back to work is given back (ZADD) for another idle
    worker, since this busy one would sit on it, which a standalone worker never does.
    """

    def __init__(self, connector: Connector, queues: Sequence[str], socket_timeout: float):
        self._connector = connector
        self._keys = [QueueKeys.of(q).wake for q in queues]
        self._socket_timeout = socket_timeout  # the block time plus slack: a hung read fails
        self._block_s = 0.0
        self._active: set[str] = set(self._keys)  # the wake keys the worker waits for
        self._changed = threading.Condition()  # _active changed, or closed
        self._idle = threading.Event()  # the worker is waiting: the threads block
        self._woken = threading.Event()  # a wake key was popped while it waited
        self._closed = threading.Event()
        self._blockers: dict[str, redis.Redis] = {}
        self._threads: list[threading.Thread] = []

    def wait(self, timeout: float, keys: Sequence[str]) -> None:
        """Return when one of ``keys`` is woken, on ``interrupt`` or ``cut``, or after
        ``timeout``."""
        if not self._threads:
            self._threads = [
                threading.Thread(
                    target=self._watch, args=(key,), name=f"echomq-wait-{i}", daemon=True
                )
                for i, key in enumerate(self._keys)
            ]
            for thread in self._threads:
                thread.start()
        self._block_s = timeout
        with self._changed:
            self._active = set(keys)
            self._changed.notify_all()
        self._idle.set()
        self._woken.wait(timeout)
        self._idle.clear()
        self._woken.clear()  # the worker claims from every queue next: nothing is missed

    def interrupt(self) -> None:
        """End a ``wait`` now (a stop): wake the waiting executor and cut the blocking reads."""
        self._woken.set()
        for blocker in self._blockers.copy().values():  # copy(): atomic, threads add to it
            blocker.connection_pool.disconnect()

    def cut(self) -> None:
        """End a ``wait`` now; the blocking reads go on (a wake-up they take meanwhile
        is given back)."""
        self._woken.set()

    def close(self) -> None:
        self._closed.set()
        with self._changed:
            self._changed.notify_all()
        self._idle.set()  # threads waiting for the next idle period see the close
        self.interrupt()
        for thread in self._threads:
            thread.join(1.0)

    def _watch(self, key: str) -> None:
        while self._idle.wait() and not self._closed.is_set():
            if key not in self._active:  # its queue has no room: its wake-up is for others
                with self._changed:
                    self._changed.wait_for(lambda: key in self._active or self._closed.is_set())
                continue
            try:
                self._wait_once(key)
            except Exception as exc:  # this thread is the queue's wake-up: it must not die
                if self._closed.is_set():
                    break
                logger.debug("blocking wait on %s failed (%s); retrying", key, exc)
                self._drop(key)
                self._connector.failed([exc])
                if isinstance(exc, redis.exceptions.MovedError):
                    # Resharded: the server ended the read naming the new owner.
                    cast(redis.RedisCluster, self._connector.client).nodes_manager.move_slot(exc)
                # Moved or failed over (MOVED, UNBLOCKED, READONLY): block again on the
                # slot's node now, after a breath (never spin; a wake-up stays in its
                # key meanwhile). Down: try again after a while, the slot map read again
                # each time; meanwhile the worker's own timeout still ends its waits.
                redirected = isinstance(exc, REDIRECTS) or str(exc).startswith("UNBLOCKED")
                self._closed.wait(REDIRECTED_WAIT_S if redirected else DOWN_WAIT_S)
        self._drop(key)

    def _drop(self, key: str) -> None:
        blocker = self._blockers.pop(key, None)
        if blocker is not None:
            blocker.close()

    def _wait_once(self, key: str) -> None:
        if key not in self._blockers:
            self._blockers[key] = blocking_client(
                cast(redis.RedisCluster, self._connector.client),
                key,
                socket_timeout=self._socket_timeout,
            )
        blocker = self._blockers[key]
        popped = blocker.bzpopmin([key], max(self._block_s, 0.001))
        if popped is None:
            return
        if self._idle.is_set() and key in self._active:
            self._woken.set()
        else:
            _, member, score = popped
            blocker.zadd(key, {cast(str, member): float(score)})  # decoded: the pool's
