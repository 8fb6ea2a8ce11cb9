"""The schedules page of the EchoMQ admin: every periodic schedule, and its actions.

A row per schedule the server holds (task, expression, zone, next and last fire,
the last job and its state, counts of fired / missed / skipped ticks), plus the
schedules declared in code that no reaper has stored yet, or stored before an
edit. Pause, resume and run now need the ``change`` permission on ``Queue``;
removing an orphaned schedule needs ``delete``. Each is a POST (CSRF-checked by
the admin site) and one engine call, hence one script.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render

from .. import conf, schedules
from ..engine.errors import CorruptRow, InvalidSchedule
from ..engine.jobs import Jobs
from ..engine.scheduler import Scheduler
from ..engine.schedules import Schedule
from ..engine.stored_schedule import StoredSchedule
from ..engine.times import from_ms
from ..queue_totals import known_queues
from .actions import SCHEDULE_ACTIONS, Action
from .job_page import EchoMQJobAdmin
from .pages import server_errors


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A schedule as the page shows it."""

    queue: str
    name: str
    status: str  # active, paused, orphaned, or "not stored" (declared, no reaper yet)
    task: str
    expression: str
    timezone: str  # shown for cron expressions only: intervals ignore zones
    zoned: bool
    catch_up: str
    overlap: str
    next_fire: datetime | None
    last_tick: datetime | None
    last_job: str
    last_job_state: str  # "" when there is none, "gone" once its row was trimmed
    fired: int
    missed: int
    skipped: int
    edited: bool  # code declares another definition than the one stored
    actions: list[Action]

    @classmethod
    def of(
        cls, stored: StoredSchedule, state: str, edited: bool, actions: list[Action]
    ) -> ScheduleRow:
        fields = stored.fields
        return cls(
            queue=stored.queue, name=stored.name, status=stored.status, task=stored.task,
            expression=stored.expression, timezone=stored.timezone, zoned=bool(fields.get("cron")),
            catch_up=fields.get("catch_up", ""), overlap=fields.get("overlap", ""),
            next_fire=from_ms(stored.next_ms), last_tick=from_ms(stored.last_tick),
            last_job=stored.last_job, last_job_state=state, fired=stored.counter("fired"),
            missed=stored.counter("missed"), skipped=stored.counter("skipped"), edited=edited,
            actions=actions,
        )  # fmt: skip

    @classmethod
    def declared(cls, schedule: Schedule) -> ScheduleRow:
        return cls(
            queue=schedule.queue, name=schedule.name, status="not stored",
            task=schedule.job.task, expression=schedule.timing.describe(),
            timezone=schedule.timezone, zoned=bool(schedule.cron), catch_up=schedule.catch_up,
            overlap=schedule.overlap,
            next_fire=None, last_tick=None, last_job="", last_job_state="", fired=0, missed=0,
            skipped=0, edited=False, actions=[],
        )  # fmt: skip


class EchoMQScheduleAdmin(EchoMQJobAdmin):
    """The EchoMQ pages, plus the schedules page and its actions."""

    @server_errors
    def schedules(self, request: HttpRequest) -> HttpResponse:
        """Every schedule of the known queues, and the declared ones not stored yet."""
        self.require(request, "view")
        jobs = conf.get_jobs()
        try:
            declared = {(s.queue, s.name): s for s in schedules.declared()}
        except InvalidSchedule:  # the system checks report it; show what the server holds
            declared = {}
        queues = sorted(set(known_queues(jobs)) | {queue for queue, _ in declared})
        now_ms, stored, unreadable = Scheduler(jobs).read_many(queues)
        rows = []
        for record in stored:
            mine = declared.pop((record.queue, record.name), None)
            edited = mine is not None and mine.digest != record.fields.get("digest")
            actions = self.allowed(request, SCHEDULE_ACTIONS, record.status)
            rows.append(ScheduleRow.of(record, self.job_state(jobs, record), edited, actions))
        rows += [ScheduleRow.declared(s) for s in declared.values()]
        context = self.context(
            request,
            "Schedules",
            rows=sorted(rows, key=lambda r: (r.queue, r.name)),
            server_now=from_ms(now_ms),
            unreadable=sorted(unreadable.items()),
            schedules_url=self.url("schedules"),
        )
        return render(request, "admin/echomq/schedules.html", context)

    @staticmethod
    def job_state(jobs: Jobs, record: StoredSchedule) -> str:
        if not record.last_job:
            return ""
        try:
            job = jobs.get(record.queue, record.last_job)
        except (ValueError, CorruptRow):  # a planted id, or a key that is not a job's row
            return "unreadable"
        return job.state if job is not None else "gone"

    @server_errors
    def schedule_action(
        self, request: HttpRequest, queue: str, name: str, action: str
    ) -> HttpResponseBase:
        """Pause, resume, run now or remove one schedule."""
        chosen = self.chosen(request, SCHEDULE_ACTIONS, action)
        listing = self.url("schedules")
        return self.act(request, chosen, (queue, name), f"Schedule {name}", listing, listing)
