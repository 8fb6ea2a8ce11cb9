"""Durable enqueue: ``enqueue`` returns only once the job is on replicas or on disk.

An acknowledged enqueue normally survives what the primary's own AOF survives:
with a replica and a failover (Sentinel, Cluster) a job acknowledged just
before the primary died may never have reached the replica that took over.
With a ``Durability``, each enqueue script call is followed, on the same
connection and in the same round trip, by::

    WAIT <replicas> <timeout>               LOCAL False: that many replicas have the write
    WAITAOF 1 <replicas> <timeout>          LOCAL True: the primary's AOF has fsynced it,
                                            and that many replicas' AOFs have too

(WAIT and WAITAOF count the writes of their own connection, hence the same
connection.) When the count is not reached in time the enqueue raises
``NotDurable``: the job was written on the primary and may or may not survive.
Neither command makes a write atomic across servers: it bounds what an
acknowledged enqueue can lose, as Redis's own documentation explains.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .connector import Call, Connector
from .errors import EchoMQError, InvalidJobOptions, NotDurable, ServerUnavailable
from .jobs import Enqueued, Jobs, NewJob
from .validation import check_int

MAX_TIMEOUT_S = 3600.0


@dataclass(frozen=True, slots=True)
class Durability:
    """What an enqueue waits for: ``replicas`` acknowledgements, the local AOF fsync."""

    replicas: int = 0
    local: bool = False
    timeout_s: float = 1.0

    def __post_init__(self) -> None:
        check_int(self.replicas, 0, 100, "REPLICAS")
        if not isinstance(self.local, bool):
            raise InvalidJobOptions("LOCAL must be True or False")
        if not self.replicas and not self.local:
            raise InvalidJobOptions("nothing to wait for: give REPLICAS of at least 1, or LOCAL")
        timeout = self.timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise InvalidJobOptions("TIMEOUT must be a number of seconds")
        if not 0 < timeout <= MAX_TIMEOUT_S:  # WAIT's 0 would wait for ever
            raise InvalidJobOptions(f"TIMEOUT must be above 0 and at most {MAX_TIMEOUT_S:g} s")

    @property
    def command(self) -> tuple[Any, ...]:
        timeout_ms = max(1, round(self.timeout_s * 1000))
        if self.local:
            return ("WAITAOF", 1, self.replicas, timeout_ms)
        return ("WAIT", self.replicas, timeout_ms)

    def shortfall(self, reply: Any) -> str:
        """What the acknowledgement lacks ("" when it is all there)."""
        if self.local:
            local, replicas = (int(n) for n in reply)
            missing = [] if local else ["the primary's AOF fsync"]
        else:
            local, replicas, missing = 1, int(reply), []
        if replicas < self.replicas:
            missing.append(f"{self.replicas} replica(s) ({replicas} acknowledged)")
        return " and ".join(missing)


class DurableJobs(Jobs):
    """``Jobs`` whose enqueues wait for ``durability`` (every other call is unchanged)."""

    def __init__(self, connector: Connector, durability: Durability, **options: Any) -> None:
        super().__init__(connector, **options)
        self.durability = durability
        # A Connector by delegation (``__getattr__``): Jobs types its connector as the class.
        waiting = cast(Connector, _WaitingConnector(connector, durability))
        self._writer = Jobs(waiting, **options)

    def enqueue_many(self, queue: str, jobs: Iterable[NewJob]) -> list[Enqueued]:
        """``Jobs.enqueue_many``, then the wait; ``NotDurable`` (with the ids) if it fell short."""
        jobs = list(jobs)
        try:
            return self._writer.enqueue_many(queue, jobs)
        except NotDurable as exc:
            ids = tuple(job.id for job in jobs)
            shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            raise NotDurable(
                f"job(s) {shown} of queue {queue} were written on the primary, but {exc}. "
                "They may or may not exist after a failover or a crash: look them up by id "
                "(the backend's get_result, or Jobs.get) before enqueueing them again.",
                ids,
            ) from None


class _WaitingConnector:
    """A connector whose ``run_many`` follows each script call with the durability wait."""

    def __init__(self, connector: Connector, durability: Durability) -> None:
        self._connector = connector
        self._durability = durability

    def __getattr__(self, name: str) -> Any:  # client, url, run... as the real one
        return getattr(self._connector, name)

    def run_many(self, calls: Sequence[Call]) -> list[Any]:
        replies: list[Any] = []
        short = []
        for call in calls:  # one round trip each: the wait is per connection
            try:
                reply, ack = self._connector.run_then(call, self._durability.command)
            except ServerUnavailable:
                # As run_many's lost pipeline: the whole enqueue is unknown now. The calls
                # after it are not sent, each to wait out its own timeout on a lost server.
                raise
            except EchoMQError as exc:  # as run_many: a refused call is its entry
                replies.append(exc)
                continue
            replies.append(reply)
            if isinstance(ack, Exception):  # e.g. WAITAOF on a server with AOF off
                short.append(f"the server refused {self._durability.command[0]} ({ack}) and")
            elif missing := self._durability.shortfall(ack):
                short.append(missing)
        if short:
            timeout = self._durability.timeout_s
            raise NotDurable(f"{short[0]} did not confirm it within {timeout:g} s")
        return replies
