"""Prometheus exposition of EchoMQ: jobs per queue and state, event counters, workers.

Mount the view in the project's ``urls.py``::

    import echomq_django.metrics

    urlpatterns = [
        path("metrics/echomq", echomq_django.metrics.prometheus_view),
    ]

Access: a request that carries ``Authorization: Bearer <token>`` where the token
is ``settings.ECHOMQ["METRICS_TOKEN"]`` (what a Prometheus scrape job sends
with ``authorization: {credentials: ...}``), or a logged-in active staff user
holding ``echomq.view_queue`` (as the admin's pages). With no token configured,
only those users can read it. Every scrape costs two
read-only script calls per queue (its counts, its limits) plus one registry read: no
scan of any set.

Families (all labelled by ``queue`` unless said otherwise)::

    echomq_jobs{queue,state}           gauge    jobs in pending/scheduled/active/completed/dead
    echomq_enqueued_total              counter  jobs enqueued
    echomq_completed_total             counter  jobs completed
    echomq_failed_total                counter  failed attempts: retried, or moved to dead
    echomq_retried_total               counter  failed attempts that were retried
    echomq_reaped_total                counter  expired leases taken back by a reaper
    echomq_dead_total                  counter  jobs moved to dead (failed, reaped past max, cancelled)
    echomq_limit_tokens{queue,limit}   gauge    a rate limit's tokens available now
    echomq_limit_running{queue,limit}  gauge    a concurrency cap's jobs leased now
    echomq_limit_waiting{queue,limit}  gauge    jobs held back on a limit (still pending, in order)
    echomq_limit_keys{queue,limit}     gauge    a task's keyed caps: keys with a job leased now
    echomq_workers                     gauge    live workers in the registry (no label)
    echomq_queue_workers{queue}        gauge    live workers that consume the queue
    echomq_worker_slots                gauge    sum of the live workers' concurrency (no label)
    echomq_worker_running_jobs         gauge    jobs the live workers are running (no label)
    echomq_outbox_jobs                 gauge    jobs committed to the outbox, not yet relayed (no label;
                                                only when a task uses ENQUEUE_ON_COMMIT "outbox")
    echomq_outbox_oldest_age_seconds   gauge    how long the oldest of them has waited (0: none)
    echomq_schedule_last_fire_timestamp_seconds{queue,schedule}  gauge  the last tick fired
    echomq_schedule_fired_total{queue,schedule}    counter  jobs its ticks enqueued
    echomq_schedule_missed_total{queue,schedule}   counter  ticks given up while no scheduler ran
    echomq_schedule_skipped_total{queue,schedule}  counter  ticks skipped: the last job still ran

``limit`` is 'rate:*' (the queue's own rate limit), 'rate:<task>', 'conc:<task>', or
'conc:<task>#*': all the keyed caps of a task (concurrency_key) together, running and
waiting summed over its keys; never one series per key. Every limit of the queue is
exported on every scrape, whatever the number of keys in use.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers

from . import conf, outbox
from .engine.errors import EchoMQError, InvalidURL, ServerUnavailable
from .engine.jobs import Jobs, QueueStats
from .engine.keyspace import STATES
from .engine.limits import GateState
from .engine.registry import WorkerInfo, list_workers
from .engine.scheduler import Scheduler
from .engine.stored_schedule import StoredSchedule
from .queue_totals import COUNTERS, counter_total, known_queues, per_queue, queue_stats, readable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
VIEW_PERMISSION = "echomq.view_queue"  # what the admin's pages need too (see models.Queue)
logger = logging.getLogger("echomq.metrics")


@dataclass
class Family:
    """One metric family: its HELP/TYPE lines and its samples."""

    name: str
    type: str  # "gauge" or "counter"
    help: str
    samples: list[tuple[dict[str, str], int | float]] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} {self.type}"]
        for labels, value in self.samples:
            lines.append(f"{self.name}{_labels(labels)} {value}")
        return "\n".join(lines) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    body = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
    return "{" + body + "}"


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def queue_families(stats: Sequence[QueueStats]) -> list[Family]:
    jobs = Family("echomq_jobs", "gauge", "Jobs in each place of a queue.")
    for s in stats:
        jobs.samples += [({"queue": s.queue, "state": state}, s.counts[state]) for state in STATES]
    families = [jobs]
    for suffix, help_text, fields in COUNTERS:
        family = Family(f"echomq_{suffix}_total", "counter", help_text)
        family.samples = [({"queue": s.queue}, counter_total(s.metrics, fields)) for s in stats]
        families.append(family)
    return families


def unreadable_family(unreadable: dict[str, str]) -> Family:
    """1 for each queue whose places, limits or schedules cannot be read (a key of
    another type): alert on it."""
    family = Family("echomq_queue_unreadable", "gauge", "1 while a queue's data cannot be read.")
    family.samples = [({"queue": queue}, 1) for queue in sorted(unreadable)]
    return family


def limit_families(limits: dict[str, list[GateState]]) -> list[Family]:
    """Per limit of each queue (``limit`` is its name, e.g. 'rate:app.tasks.sync'; a
    task's keyed caps together: 'conc:app.tasks.sync#*', with its keys in use)."""
    tokens = Family("echomq_limit_tokens", "gauge", "A rate limit's tokens available now.")
    running = Family("echomq_limit_running", "gauge", "A concurrency cap's jobs leased now.")
    waiting = Family("echomq_limit_waiting", "gauge", "Jobs held back on a limit, still pending.")
    keys = Family(
        "echomq_limit_keys", "gauge", "Keys of a task's keyed concurrency caps with a job leased."
    )
    for queue, gates in limits.items():
        for gate in gates:
            labels = {"queue": queue, "limit": gate.name}
            level = tokens if gate.kind == "rate" else running
            level.samples.append((labels, round(gate.level, 3)))
            waiting.samples.append((labels, gate.waiting))
            if gate.keys is not None:
                keys.samples.append((labels, gate.keys))
    return [tokens, running, waiting, keys]


def worker_families(workers: Sequence[WorkerInfo], queues: Iterable[str]) -> list[Family]:
    per_queue = Family("echomq_queue_workers", "gauge", "Live workers that consume the queue.")
    per_queue.samples = [
        ({"queue": q}, sum(1 for w in workers if q in w.queues)) for q in sorted(set(queues))
    ]
    return [
        Family("echomq_workers", "gauge", "Live workers in the registry.", [({}, len(workers))]),
        per_queue,
        Family(
            "echomq_worker_slots",
            "gauge",
            "Sum of the live workers' concurrency.",
            [({}, sum(w.concurrency for w in workers))],
        ),
        Family(
            "echomq_worker_running_jobs",
            "gauge",
            "Jobs the live workers are running.",
            [({}, sum(len(w.running) for w in workers))],
        ),
    ]


def schedule_families(stored: Sequence[StoredSchedule]) -> list[Family]:
    """Per schedule: the last tick fired, and its fired / missed / skipped counts."""
    last = Family(
        "echomq_schedule_last_fire_timestamp_seconds", "gauge", "Unix time of the last tick fired."
    )
    counts = [
        Family(f"echomq_schedule_{name}_total", "counter", text)
        for name, text in (
            ("fired", "Jobs the schedule's ticks enqueued."),
            ("missed", "Ticks given up while no scheduler ran (the catch-up policy)."),
            ("skipped", "Ticks skipped while the schedule's last job was not finished."),
        )
    ]
    for s in stored:
        labels = {"queue": s.queue, "schedule": s.name}
        if s.last_tick is not None:
            last.samples.append((labels, s.last_tick / 1000))
        for family, name in zip(counts, ("fired", "missed", "skipped"), strict=True):
            family.samples.append((labels, s.counter(name)))
    return [last, *counts]


def exposition(jobs: Jobs) -> str:
    """The whole text page for every known queue. A queue with a key the engine cannot
    use (its places, limits or schedules) is 1 in ``echomq_queue_unreadable`` and the
    rest is exported; a corrupt workers' registry leaves out the worker families."""
    queues = known_queues(jobs)
    stats, unreadable = queue_stats(jobs, queues)
    limits, bad_limits = per_queue(queues, jobs.limits)
    _, stored, bad_schedules = Scheduler(jobs).read_many(queues)
    families = [*queue_families(stats), unreadable_family(unreadable | bad_limits | bad_schedules)]
    families += limit_families(limits)
    workers, why = readable(lambda: list_workers(jobs.connector))
    if workers is None:
        logger.warning("metrics: the workers' registry cannot be read: %s", why)
    else:
        families += worker_families(workers, {q for w in workers for q in w.queues} | set(queues))
    families += outbox_families()
    families += schedule_families(stored)
    return "".join(f.render() for f in families)


def outbox_families() -> list[Family]:
    """The outbox backlog (one bounded COUNT and one index read), when a task uses it."""
    if not outbox.enabled():
        return []
    backlog = outbox.backlog()
    return [
        Family(
            "echomq_outbox_jobs",
            "gauge",
            "Jobs committed to the outbox, not yet relayed to the server.",
            [({}, backlog.jobs)],
        ),
        Family(
            "echomq_outbox_oldest_age_seconds",
            "gauge",
            "How long the oldest job in the outbox has waited.",
            [({}, round(backlog.oldest_age_s or 0.0, 3))],
        ),
    ]


def _allowed(request: HttpRequest) -> bool:
    """A matching bearer token, or an active staff user who may view the queues."""
    token = conf.get_settings().metrics_token
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        return hmac.compare_digest(header.removeprefix("Bearer ").encode(), token.encode())
    user = getattr(request, "user", None)
    return bool(user and user.is_active and user.is_staff and user.has_perm(VIEW_PERMISSION))


@require_safe
@never_cache  # it answers per credential: no shared cache may keep one user's page
@vary_on_headers("Authorization", "Cookie")
def prometheus_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text page; 403 without access, 503 while the server cannot be
    reached, 502 for data no queue can be blamed for (as the admin's pages)."""
    if not _allowed(request):
        return HttpResponse("Forbidden\n", status=403, content_type="text/plain")
    try:
        body = exposition(conf.get_jobs())
    except (ServerUnavailable, InvalidURL) as exc:
        return HttpResponse(
            f"EchoMQ server unavailable: {exc}\n", status=503, content_type="text/plain"
        )
    except EchoMQError as exc:
        return HttpResponse(
            f"EchoMQ unreadable data: {type(exc).__name__}: {exc}\n",
            status=502,
            content_type="text/plain",
        )
    return HttpResponse(body, content_type=CONTENT_TYPE)
