"""Schedules on the server: sync from code, fire due ticks, operator actions, reads.

A queue's schedules live in its own slot: ``emq:{q}:schedules`` (name -> next fire
ms) and one hash per schedule (its definition, synced from code, and its fire
record). Every change is one script: ``schedule_sync``, ``schedule_orphan``,
``fire``, ``schedule_pause``, ``schedule_resume``, ``schedule_run_now``,
``schedule_remove``. Planning a fire (which ticks, the next fire time) needs the
cron parser and the time zone database, so it runs here, in Python, on the
server's clock as a read returned it; the ``fire`` script then checks that the
next fire time is still the one planned from (a fence, like a lease token) and
that every tick is due on its own clock, so a plan that lost the race, or came
early, changes nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from . import script
from .connector import Call
from .errors import EchoMQError, InvalidSchedule, ServerUnavailable
from .jobs import Jobs
from .keyspace import QueueKeys, new_job_id, validate_schedule_name
from .schedules import Schedule, UnreadableSchedule, stored_number, stored_timing
from .stored_schedule import StoredSchedule, stored_records
from .timing import MAX_MS, plan

logger = logging.getLogger("echomq.scheduler")

DUE_LIMIT = 100  # due schedules read per queue per pass
LIST_LIMIT = 1000  # schedules read per queue by a listing
SYNC_RETRIES = 3


@dataclass(frozen=True, slots=True)
class Fired:
    """The outcome of one ``fire`` call."""

    queue: str
    name: str
    outcome: str  # fired, skipped, stale, early
    ids: tuple[str, ...]
    skipped: int
    missed: int


@dataclass(frozen=True, slots=True)
class FirePass:
    """What one pass over the due schedules did, and when the next tick is due."""

    fired: list[Fired]
    wait_ms: int | None  # until the earliest next fire time known (None: no schedule ahead)


class Scheduler:
    """The schedules of the queues a scheduler (the reaper) serves."""

    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs
        self.connector = jobs.connector
        self._unfit: dict[tuple[str, str], str] = {}  # (queue, name) -> why it cannot fire

    # -- reads ---------------------------------------------------------------------

    def read(self, queue: str) -> tuple[int, list[StoredSchedule]]:
        """(server now ms, the queue's schedules in order of next fire time)."""
        schedule_list = script.load("schedule_list")
        reply = self.connector.run(
            schedule_list, schedule_list.keys_for(QueueKeys.of(queue)), [LIST_LIMIT]
        )
        return int(reply[0]), stored_records(queue, reply[1:])

    def read_many(
        self, queues: Iterable[str]
    ) -> tuple[int | None, list[StoredSchedule], dict[str, str]]:
        """Every schedule of ``queues`` in one round trip, the server's clock, and the
        queues whose schedules cannot be read, with why (their index planted as another
        type): one such queue hides no other's. A lost server raises."""
        names = [QueueKeys.of(q) for q in queues]
        schedule_list = script.load("schedule_list")
        calls = [Call(schedule_list, schedule_list.keys_for(k), [LIST_LIMIT]) for k in names]
        now, found, unreadable = None, [], {}
        for keys, reply in zip(names, self.connector.run_many(calls)):
            if isinstance(reply, Exception):
                if isinstance(reply, ServerUnavailable) or not isinstance(reply, EchoMQError):
                    raise reply
                unreadable[keys.queue] = str(reply)
                continue
            now = int(reply[0])
            found += stored_records(keys.queue, reply[1:])
        return now, found, unreadable

    def get(self, queue: str, name: str) -> StoredSchedule | None:
        validate_schedule_name(name)
        return next((s for s in self.read(queue)[1] if s.name == name), None)

    # -- sync from code (a scheduler's start) ------------------------------------------

    def sync(self, declared: Sequence[Schedule], queues: Iterable[str] = ()) -> dict[str, str]:
        """Store each declared schedule; mark the ones of ``queues`` no longer declared.

        Returns ``"queue/name" -> outcome`` (created, edited, unchanged, restored,
        orphaned). A definition that did not change writes nothing: its next fire
        time and record stand, so restarts never repeat or shift a tick. An edit is
        planned by ``replan``.
        """
        by_queue: dict[str, list[Schedule]] = {}
        for schedule in declared:
            by_queue.setdefault(schedule.queue, []).append(schedule)
        outcomes: dict[str, str] = {}
        for queue in dict.fromkeys([*by_queue, *queues]):
            self.jobs.register_queue(queue)  # so reapers that discover queues find it
            mine = {s.name: s for s in by_queue.get(queue, [])}
            for name, schedule in mine.items():
                outcomes[f"{queue}/{name}"] = "failed"  # unless it is stored
                with apart(f"schedule {queue}/{name} cannot be stored"):
                    outcomes[f"{queue}/{name}"] = self._sync_one(schedule)
            keys, orphan = QueueKeys.of(queue), script.load("schedule_orphan")
            for stored in self.read(queue)[1]:
                if stored.name in mine:
                    continue
                with apart(f"schedule {queue}/{stored.name} cannot be marked orphaned"):
                    call_keys = orphan.keys_for(keys, schedule=stored.name)
                    if self.connector.run(orphan, call_keys, [stored.name]):
                        outcomes[f"{queue}/{stored.name}"] = "orphaned"
        return outcomes

    def _sync_one(self, schedule: Schedule) -> str:
        sync = script.load("schedule_sync")
        sync_keys = sync.keys_for(QueueKeys.of(schedule.queue), schedule=schedule.name)
        pairs = [value for item in schedule.definition().items() for value in item]
        for _ in range(SYNC_RETRIES):
            now, stored = self.read(schedule.queue)
            record = next((s for s in stored if s.name == schedule.name), None)
            next_ms, missed = replan(schedule, record, now)
            fence = record.score if record is not None else ""
            outcome: str = self.connector.run(  # "unchanged", "retry" or the outcome
                sync, sync_keys, [schedule.name, schedule.digest, next_ms, fence, missed, *pairs]
            )
            if outcome != "retry":
                return outcome
        raise EchoMQError(f"schedule {schedule.name} kept firing while it was synced")

    # -- firing ----------------------------------------------------------------------

    def fire_due(self, queues: Sequence[str]) -> FirePass:
        """Fire every due schedule of ``queues``: one read per queue (one round trip), then
        one ``fire`` call per due schedule (pipelined). A schedule whose record cannot be
        planned is logged and left out of the wait, so it cannot spin the loop."""
        names = [QueueKeys.of(q) for q in queues]
        due = script.load("schedule_due")
        reads = self.connector.run_many([Call(due, due.keys_for(k), [DUE_LIMIT]) for k in names])
        calls: list[Call] = []
        planned: list[tuple[str, str, int]] = []
        ahead: list[int] = []
        for keys, reply in zip(names, reads):
            if isinstance(reply, Exception):
                if isinstance(reply, ServerUnavailable):
                    raise reply
                logger.error("reading the schedules of queue %s failed: %s", keys.queue, reply)
                continue
            now = int(reply[0])
            with contextlib.suppress(UnreadableSchedule):  # a planted 1e300: the poll bounds it
                if (earliest := stored_number(reply[1], MAX_MS)) is not None:
                    ahead.append(earliest - now)
            for name, score, flat in zip(reply[2::3], reply[3::3], reply[4::3]):
                try:
                    call, missed, next_ms = self._fire_call(keys, name, score, flat, now)
                except ServerUnavailable:
                    raise
                except Exception as exc:  # one schedule never stops the others
                    self._unfit_to_fire(keys.queue, name, exc)
                    continue
                self._unfit.pop((keys.queue, name), None)
                calls.append(call)
                planned.append((keys.queue, name, missed))
                ahead.append(next_ms - now)
        fired = []
        for (queue, name, missed), reply in zip(planned, self.connector.run_many(calls)):
            if isinstance(reply, Exception):
                if isinstance(reply, ServerUnavailable):
                    raise reply
                logger.error("firing schedule %s of queue %s failed: %s", name, queue, reply)
                continue
            outcome = reply[0]
            done = Fired(queue, name, outcome, tuple(reply[3:]), int(reply[2]), missed)
            fired.append(done)
            _log(done)
        return FirePass(fired, min(ahead) if ahead else None)

    @staticmethod
    def _fire_call(
        keys: QueueKeys, name: str, score: str, flat: Sequence[str], now: int
    ) -> tuple[Call, int, int]:
        record = StoredSchedule.of(keys.queue, name, score, flat)
        fence = record.number("next_ms")
        if fence is None:  # due, so never +inf: the server changed under us
            raise UnreadableSchedule(f"schedule {record.name} is due with no next fire time")
        grace = record.number("grace_ms") or 0
        timing = stored_timing(record.fields)
        chosen = plan(timing, record.fields.get("catch_up", "latest"), grace, fence, now)
        fire = script.load("fire")
        call = Call(
            fire,
            fire.keys_for(keys, schedule=record.name),
            [record.name, fence, chosen.next_ms, chosen.missed, *chosen.ticks],
        )
        return call, chosen.missed, chosen.next_ms

    def _unfit_to_fire(self, queue: str, name: str, exc: Exception) -> None:
        """Log why a due schedule cannot fire: at ERROR when the reason is new (a reaper
        meets it on every pass, 4 times a second), with the traceback when it is a bug."""
        why = f"{type(exc).__name__}: {exc}"
        if self._unfit.get((queue, name)) != why:
            if len(self._unfit) > 10_000:  # bounded: names planted by the thousand
                self._unfit.clear()
            self._unfit[(queue, name)] = why
            logger.error(
                "schedule %s of queue %s cannot fire: %s", name, queue, why,
                exc_info=None if isinstance(exc, EchoMQError) else exc,
            )  # fmt: skip

    # -- operator actions (one script each) ---------------------------------------------

    def pause(self, queue: str, name: str) -> None:
        pause = script.load("schedule_pause")
        self.connector.run(pause, pause.keys_for(QueueKeys.of(queue), schedule=name), [name])

    def resume(self, queue: str, name: str) -> int:
        """Fire again from the first tick after now (and after its last tick). Returns it."""
        resume = script.load("schedule_resume")
        # The name is checked (keys built) before anything is read.
        resume_keys = resume.keys_for(QueueKeys.of(queue), schedule=name)
        now, stored = self.read(queue)
        record = next((s for s in stored if s.name == name), None)
        next_ms = 0
        if record is not None:  # else the script says EMQNOTFOUND
            next_ms = stored_timing(record.fields).next_after(record.after(now))
        self.connector.run(resume, resume_keys, [name, next_ms])
        return next_ms

    def run_now(self, queue: str, name: str) -> str:
        """Enqueue one job of the schedule now (paused or not). Returns its id."""
        keys = QueueKeys.of(queue)
        job_id = new_job_id()
        run_now = script.load("schedule_run_now")
        reply = self.connector.run(
            run_now, run_now.keys_for(keys, schedule=name, job=job_id), [name, job_id]
        )
        first: str = reply[0]  # the script's reply: {id, state}
        return first

    def remove(self, queue: str, name: str) -> None:
        """Delete an orphaned schedule's record (``WrongState`` if code still declares it)."""
        remove = script.load("schedule_remove")
        self.connector.run(remove, remove.keys_for(QueueKeys.of(queue), schedule=name), [name])


def replan(schedule: Schedule, record: StoredSchedule | None, now: int) -> tuple[int, int]:
    """(next fire time, ticks given up) of ``schedule`` stored over ``record`` at ``now``.

    A schedule whose timing is unchanged keeps its next fire time: an edit of its job
    (its arguments, its task's options, an upgrade that stores one more of them) drops
    no tick, the due ones fire by its catch-up policy. A new timing fires from its first
    tick after now and after the last tick fired; the old timing's ticks that were due
    (from the stored next fire time to now, counted as ``plan`` counts) are missed.
    """
    if record is None:
        return schedule.timing.next_after(now), 0
    after = record.after(now)  # UnreadableSchedule for a planted last tick
    stored_next = record.next_ms  # None while paused or orphaned (never due)
    same_timing = all(record.fields.get(f) == v for f, v in schedule.timing_fields().items())
    if same_timing and stored_next is not None and stored_next > (record.number("last_tick") or -1):
        return stored_next, 0
    missed = 0
    if stored_next is not None and stored_next <= now:
        with contextlib.suppress(InvalidSchedule):  # an unreadable old timing: none counted
            missed = stored_timing(record.fields).count(now, stored_next)
    return schedule.timing.next_after(after), missed


@contextlib.contextmanager
def apart(what: str) -> Iterator[None]:
    """A step that must not stop the ones beside it (one schedule among others, the
    schedules beside a reaper's sweeps): any failure but a lost server (the outage
    policy's) is logged, with the traceback when it is not the engine's (a bug)."""
    try:
        yield
    except ServerUnavailable:
        raise
    except Exception as exc:
        logger.error(
            "%s: %s: %s", what, type(exc).__name__, exc,
            exc_info=None if isinstance(exc, EchoMQError) else exc,
        )  # fmt: skip


def _log(done: Fired) -> None:
    if done.ids:
        logger.info("schedule %s/%s fired: %s", done.queue, done.name, ", ".join(done.ids))
    if done.skipped:
        logger.info(
            "schedule %s/%s skipped %d tick(s): its last job has not finished",
            done.queue, done.name, done.skipped,
        )  # fmt: skip
    if done.missed and done.outcome in ("fired", "skipped"):
        logger.warning(
            "schedule %s/%s missed %d tick(s): no scheduler fired them in time, its catch_up "
            "gave them up", done.queue, done.name, done.missed,
        )  # fmt: skip


__all__ = ["FirePass", "Fired", "Scheduler", "StoredSchedule"]
