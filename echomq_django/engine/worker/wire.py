"""The worker's wire: its own connection for claims and completions, on which calls are
sent now and their replies read later, in order.

A thread that sends a claim goes on running jobs while the server works on it, and
reads the reply between two jobs (``pump``): one thread claims, runs and completes
without waiting for a round trip, and without handing its work to another thread
(threads of one process that take turns on the GIL to send and parse cost a short
job about as much as the job itself). Any thread may send or pump, one at a time
(``lock``): executors between their jobs, the heartbeat while they are all busy.

Each batch of calls is answered once, with one reply per call (an error reply as its
typed exception). A lost connection answers every batch still waiting with
ServerUnavailable (those calls may or may not have run: a claim is asked again under
its claim id, a completion is idempotent) and refuses sends until the outage's
backoff has passed. A reply that says its call did not run (NOSCRIPT after a server
restart, a cluster slot that moved) is run again at once through the connector,
which loads the script or follows the slot.

A stopping worker's reads are bounded by its stop deadline (``stop_by``), not only by
the socket timeout: a connection a failover left half-open (open, silent) would
otherwise hold the shutdown for the whole timeout, and the completions on it would be
lost. While stopping, a reply is awaited for at most half the time from its send (or
the stop) to the deadline; then the connection counts as lost, and the completions
on it are sent again on a fresh one (complete is token-fenced and idempotent).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.exceptions import NoScriptError

from .. import spans
from ..connections import evalsha
from ..connector import Call, Connector, translate_error
from ..errors import EchoMQError, ServerUnavailable
from ..outage import Outage

Answer = Callable[[list[Any]], None]
_LOST = (redis.ConnectionError, redis.TimeoutError, OSError)
LOOK_S = 0.1  # a wait for a reply looks at the stop deadline this often


@dataclass(eq=False, slots=True)
class _Batch:
    calls: Sequence[Call]
    answer: Answer
    lines: list[tuple[str, list[int]]]  # each line it went on, with the calls sent there
    sent: float  # monotonic
    span: Any = None


class Wire:
    def __init__(self, connector: Connector, outage: Outage) -> None:
        self.lock = threading.RLock()  # one sender or reader at a time
        self._connector = connector
        self._outage = outage
        self._lines: dict[str, Any] = {}  # node name ("" on a single server) -> connection
        self._waiting: deque[_Batch] = deque()
        self.down_until = 0.0  # monotonic: sends are refused until then (an outage's backoff)
        self._stopped_at = math.inf  # monotonic: when the worker began to stop
        self.deadline = math.inf  # monotonic: no read waits past this (the stop's end)

    @property
    def waiting_since(self) -> float:
        """When the oldest batch still waiting for its replies was sent (0: none waits)."""
        waiting = self._waiting
        return waiting[0].sent if waiting else 0.0

    def send(self, calls: Sequence[Call], answer: Answer) -> None:
        """Send ``calls`` in one write per connection; ``answer`` gets their replies from
        a later ``pump`` (at once, as failures, while the server is away)."""
        with self.lock:
            now = time.monotonic()
            if now < self.down_until:
                answer([ServerUnavailable("the server is away (backing off)")] * len(calls))
                return
            lines: dict[str, list[int]] = {}
            for i, call in enumerate(calls):
                lines.setdefault(self._connector.node_of(call.keys[0]), []).append(i)
            batch = _Batch(calls, answer, list(lines.items()), now)
            if spans.recording():
                names = "+".join(sorted({call.script.name for call in calls}))
                batch.span = spans.started_script_span(names, calls[0].keys, len(calls))
            self._waiting.append(batch)  # before the writes: a failed one answers it too
            try:
                for name, indexes in batch.lines:
                    conn = self._line(name, calls[indexes[0]].keys[0])
                    conn.send_packed_command(
                        conn.pack_commands([evalsha(calls[i]) for i in indexes])
                    )
            except _LOST as exc:
                self._fail(exc)

    def stop_by(self, deadline: float) -> None:
        """The worker stops: from now on no read waits past ``deadline`` (monotonic)."""
        self._stopped_at = min(self._stopped_at, time.monotonic())
        self.deadline = deadline

    def pump(self, *, wait: bool = False) -> None:
        """Hand the replies that have come to their batches' answers, in the order sent;
        ``wait``: wait for the oldest batch's replies first (while stopping, no longer
        than its patience: then the connection counts as lost)."""
        with self.lock:
            while self._waiting:
                batch = self._waiting[0]
                if not self._answered(batch):
                    if not wait:
                        return
                    if not self._await(batch):
                        self._fail(redis.TimeoutError("no reply before the stop's deadline"))
                        return
                try:
                    replies = self._read(batch)
                except _LOST as exc:
                    self._fail(exc)
                    return
                self._waiting.popleft()
                self._outage.up()
                self._settle(batch, replies)
                wait = False

    def close(self) -> None:
        with self.lock:
            for conn in self._lines.values():
                conn.disconnect()
            self._lines.clear()

    def _line(self, name: str, key: str) -> Any:
        conn = self._lines.get(name)
        if conn is None:
            conn = self._lines[name] = self._connector.line_for(key)
        return conn

    def _answered(self, batch: _Batch) -> bool:
        """Its first reply has begun to arrive (the rest follow on the same connection)."""
        name, _ = batch.lines[0]
        conn = self._lines.get(name)
        try:
            return conn is None or bool(conn.can_read(timeout=0))
        except _LOST:
            return True  # the read will meet the loss and say so

    def _await(self, batch: _Batch) -> bool:
        """Wait for the batch's first reply: as long as the socket timeout, and while
        stopping, no longer than its patience. False: it did not come in time."""
        conn = self._lines.get(batch.lines[0][0])
        if conn is None:
            return True  # the read meets the loss and says so
        timeout = conn.socket_timeout
        end = math.inf if timeout is None else time.monotonic() + timeout
        while True:
            left = min(end, self._patience(batch)) - time.monotonic()
            if left <= 0:
                return False
            try:
                if conn.can_read(timeout=min(left, LOOK_S)):
                    return True
            except _LOST:
                return True

    def _patience(self, batch: _Batch) -> float:
        """When a stopping worker stops waiting for ``batch``'s replies: halfway from its
        send (or the stop) to the deadline, leaving the other half to send it again."""
        deadline = self.deadline
        if deadline == math.inf:
            return math.inf
        begun = max(batch.sent, self._stopped_at)
        return begun + max(0.0, deadline - begun) / 2

    def _read(self, batch: _Batch) -> list[Any]:
        replies: list[Any] = [None] * len(batch.calls)
        for name, indexes in batch.lines:
            conn = self._lines.get(name)
            if conn is None:
                raise redis.ConnectionError("the connection was closed")
            for i in indexes:
                try:
                    replies[i] = conn.read_response()
                except redis.ResponseError as exc:  # an error reply, read whole: in step
                    replies[i] = exc
        return replies

    def _settle(self, batch: _Batch, replies: list[Any]) -> None:
        """Run again what did not run (NOSCRIPT, a moved slot), type the errors, answer."""
        calls = batch.calls
        again = [
            i
            for i, reply in enumerate(replies)
            if isinstance(reply, NoScriptError | redis.exceptions.AskError)
        ]
        if again:
            try:
                for i, reply in zip(again, self._connector.run_many([calls[i] for i in again])):
                    replies[i] = reply
            except EchoMQError as exc:
                for i in again:
                    replies[i] = exc
        self._connector.failed(replies)
        typed = [translate_error(r) if isinstance(r, Exception) else r for r in replies]
        if batch.span is not None:
            spans.note_refusals(batch.span, typed)
            batch.span.end()
        batch.answer(typed)

    def _fail(self, exc: BaseException) -> None:
        """The connection is lost: every waiting batch is answered as not known to have
        run, and sends wait for the outage's backoff."""
        for conn in self._lines.values():
            conn.disconnect()
        self._lines.clear()
        # The pool's idle connections may be as dead (a failover, a network cut): the
        # next calls on them (a script reloaded after NOSCRIPT) open fresh ones.
        self._connector.drop_idle()
        self._connector.failed([exc])  # on a cluster, the node may be gone: where is its slot now?
        failed = list(self._waiting)
        self._waiting.clear()
        lost = translate_error(exc) if isinstance(exc, Exception) else exc
        self.down_until = time.monotonic() + self._outage.down(lost, "a claim or completion")
        why = ServerUnavailable(f"the connection was lost: {exc}")
        for batch in failed:
            if batch.span is not None:
                batch.span.end()
            batch.answer([why] * len(batch.calls))
