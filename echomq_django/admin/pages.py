"""The EchoMQ pages of the Django admin: dashboard, lists, search, operator actions.

Everything is read from the server through the engine (``conf.get_jobs()``), and
every operator action is one engine call, hence one atomic script. The views
live inside an ``AdminSite`` (see ``admin.mount``): the site's ``admin_view``
sends anonymous users to its login page and adds CSRF protection; the
permissions of the unmanaged ``Queue`` model decide what a staff user may see
(``view``) and do (``change``: retry, run now, cancel; ``delete``: delete,
purge). Queue names, states and job ids in URLs are validated by path
converters before a view runs, so an ill-formed one is a 404 and never a key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import wraps
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.http.response import HttpResponseBase, HttpResponseNotAllowed
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.text import capfirst

from .. import conf, outbox, task_filter
from ..engine.errors import (
    EchoMQError,
    InvalidJobId,
    InvalidURL,
    JobNotFound,
    ServerUnavailable,
)
from ..engine.jobs import Bound
from ..engine.keyspace import STATES, validate_job_id
from ..engine.registry import list_workers
from ..engine.rows import int_or_none
from ..engine.stored import find_queue
from ..queue_totals import (  # the registry ∪ ECHOMQ["QUEUES"], as the CLI shows them
    known_queues,
    per_queue,
    queue_stats,
    readable,
)
from .actions import JOB_ACTIONS, QUEUE_ACTIONS, Action, set_bound
from .chart import Series, merge, sparkline, throughput_chart
from .presenters import (
    ListedJob,
    QueueSummary,
    StateCount,
    WorkerRow,
    plural,
)

PER_PAGE = 50
# The last page number a list link may name: its offset stays within what a page
# script call accepts (a larger ?page= shows "past the end", never an error).
MAX_PAGE = 2**40 // PER_PAGE
# Each place's sorted-set score, and what its two directions read as.
ORDERS = {
    "pending": ("run order (priority, then first in)", "next first", "last first"),
    "scheduled": ("due time", "soonest first", "latest first"),
    "active": ("lease deadline", "soonest first", "latest first"),
    "completed": ("end of retention", "oldest first", "newest first"),
    "dead": ("end of retention", "oldest first", "newest first"),
}
THROUGHPUT_MINUTES = 60
NEWEST_FIRST = ("completed", "dead")  # what an operator looks for there is the latest
TASK_COUNTS_SHOWN = 20
# Row fields read with each page entry (one HMGET per entry, inside the page script).
LIST_FIELDS = (
    "task", "priority", "attempts", "refunds", "max_attempts", "enqueued_at", "started_at",
    "finished_at", "due_ms", "lease_deadline", "worker", "last_error",
)  # fmt: skip


View = Callable[..., HttpResponseBase]


def server_errors(view: View) -> View:
    """Render a lost server as a clear 503 page inside the admin, never a 500.

    Any other engine error (data the engine cannot use: a queue's set planted as a
    STRING answers WRONGTYPE) is a 502 page that says what the server answered.
    """

    @wraps(view)
    def wrapper(
        self: EchoMQAdmin, request: HttpRequest, *args: Any, **kwargs: Any
    ) -> HttpResponseBase:
        try:
            return view(self, request, *args, **kwargs)
        except (ServerUnavailable, InvalidURL) as exc:
            context = self.context(request, "Server unavailable", error=str(exc))
            return render(request, "admin/echomq/unavailable.html", context, status=503)
        except EchoMQError as exc:
            context = self.context(request, "Unreadable data", error=f"{type(exc).__name__}: {exc}")
            return render(request, "admin/echomq/data_error.html", context, status=502)

    return wrapper


class EchoMQAdmin:
    """The EchoMQ pages of one admin site, guarded by one ``ModelAdmin``'s permissions."""

    def __init__(self, site: admin.AdminSite, model_admin: admin.ModelAdmin[Any]) -> None:
        self.site = site
        self.model_admin = model_admin

    def url(self, name: str, **kwargs: Any) -> str:
        return reverse(f"admin:echomq_{name}", kwargs=kwargs, current_app=self.site.name)

    def require(self, request: HttpRequest, permission: str) -> None:
        """Raise PermissionDenied (403) unless the user holds ``permission`` on Queue."""
        check = getattr(self.model_admin, f"has_{permission}_permission")
        if not check(request):
            raise PermissionDenied(f"you need the {permission} permission on EchoMQ queues")

    def chosen(self, request: HttpRequest, actions: dict[str, Action], slug: str) -> Action:
        """The action ``slug`` names (404 if none), once the user may run it (else 403)."""
        action = actions.get(slug)
        if action is None:
            raise Http404(f"unknown action {slug!r}")
        self.require(request, action.permission)
        return action

    def allowed(self, request: HttpRequest, actions: dict[str, Action], state: str) -> list[Action]:
        """The actions offered in ``state`` that this user holds the permission for."""
        held = {
            "change": self.model_admin.has_change_permission(request),
            "delete": self.model_admin.has_delete_permission(request),
        }
        return [a for a in actions.values() if state in a.states and held[a.permission]]

    def context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        request.current_app = self.site.name  # {% url 'admin:...' %} resolves on this site
        return {
            **self.site.each_context(request),
            "title": title,
            "opts": self.model_admin.model._meta,
            "app_label": self.model_admin.model._meta.app_label,
            "server": conf.get_settings().safe_url,
            "dashboard_url": self.url("dashboard"),
            "search_url": self.url("search"),
            "now": datetime.now(tz=UTC),
            **extra,
        }

    def back(self, request: HttpRequest, fallback: str) -> HttpResponseRedirect:
        """Redirect to the form's ``next`` when it is a local URL, else to ``fallback``."""
        target = request.POST.get("next", "")
        if target and url_has_allowed_host_and_scheme(
            target, {request.get_host()}, require_https=request.is_secure()
        ):
            return HttpResponseRedirect(target)
        return HttpResponseRedirect(fallback)

    @server_errors
    def dashboard(self, request: HttpRequest) -> HttpResponse:
        """Every queue's counts, the last hour's throughput, the workers alive."""
        self.require(request, "view")
        jobs = conf.get_jobs()
        queues, series = [], []
        names = known_queues(jobs)
        stats, unreadable = queue_stats(jobs, names)  # one broken queue hides no other
        counts = {s.queue: s.counts for s in stats}
        minutes, unread = per_queue(names, lambda q: jobs.throughput(q, THROUGHPUT_MINUTES))
        for name in names:
            one = minutes.get(name, [])
            series.append(one)
            summary = self.summary(name, counts.get(name, dict.fromkeys(STATES, 0)), one)
            problem = unreadable.get(name) or unread.get(name, "")
            queues.append(replace(summary, problem=problem))
        totals = [sum(q.counts[i].count for q in queues) for i in range(len(STATES))]
        registry, workers_problem = readable(lambda: list_workers(jobs.connector))
        workers = [WorkerRow.of(w) for w in registry or []]
        context = self.context(
            request,
            "EchoMQ",
            queues=queues,
            totals=list(zip(STATES, totals)),
            chart=throughput_chart(merge(series)),
            workers=sorted(workers, key=lambda w: (w.host, w.pid, w.id)),
            workers_problem=workers_problem,
            outbox=outbox.backlog() if outbox.enabled() else None,
        )
        return render(request, "admin/echomq/dashboard.html", context)

    def summary(self, queue: str, counts: dict[str, int], series: Series) -> QueueSummary:
        """A queue's counts with links to its lists, and its throughput in short."""
        return QueueSummary(
            name=queue,
            counts=[
                StateCount(s, counts[s], self.url("list", queue=queue, state=s)) for s in STATES
            ],
            spark=sparkline(series),
            completed=sum(done for _, done, _ in series),
            failed=sum(failed for _, _, failed in series),
        )

    @server_errors
    def job_list(self, request: HttpRequest, queue: str, state: str) -> HttpResponse:
        """One page of a place's sorted set, read with offsets (never the whole set)."""
        self.require(request, "view")
        jobs = conf.get_jobs()
        order = request.GET.get("order") or ("newest" if state in NEWEST_FIRST else "oldest")
        newest = order == "newest"
        number = min(max(int_or_none(request.GET.get("page")) or 1, 1), MAX_PAGE)
        task = request.GET.get("task", "").strip()[:500]
        offset = (number - 1) * PER_PAGE
        complete = True
        if task:  # read from the set (bounded): no index by task
            found = task_filter.of_task(
                jobs, queue, state, task, offset=offset, count=PER_PAGE,
                newest_first=newest, fields=LIST_FIELDS,
            )  # fmt: skip
            entries, total, complete = found.entries, found.total, found.complete
        else:
            page = jobs.page(
                queue, state, offset=offset, count=PER_PAGE, newest_first=newest,
                fields=LIST_FIELDS,
            )  # fmt: skip
            entries, total = page.entries, page.total
        tasks, read = task_filter.counts(jobs, queue, state)
        pages = max((total + PER_PAGE - 1) // PER_PAGE, 1)
        stats = jobs.stats(queue)
        limits, limits_problem = readable(lambda: jobs.limits(queue))
        context = self.context(
            request,
            f"{queue} · {state}",
            queue=queue,
            state=state,
            tabs=self.summary(queue, stats.counts, ()).counts,
            limits=limits,  # rate limits and caps: tokens / running, waiting
            limits_problem=limits_problem,
            rows=[ListedJob.from_fields(e.id, e.fields) for e in entries],
            total=total,
            page_number=number,
            pages=pages,
            first_index=(number - 1) * PER_PAGE + 1,
            last_index=(number - 1) * PER_PAGE + len(entries),
            order="newest" if newest else "oldest",
            order_by=ORDERS[state],
            task=task,
            task_query=f"&{urlencode({'task': task})}" if task else "",
            partial=task and not complete,
            task_counts=tasks.most_common(TASK_COUNTS_SHOWN),
            tasks_read=read,
            queue_actions=self.allowed(request, QUEUE_ACTIONS, state),
            retry=next(iter(self.allowed(request, {"retry": JOB_ACTIONS["retry"]}, state)), None),
        )
        return render(request, "admin/echomq/job_list.html", context)

    @server_errors
    def search(self, request: HttpRequest) -> HttpResponse:
        """Find a job by id in every known queue (an id does not name its queue)."""
        self.require(request, "view")
        wanted = request.GET.get("id", "").strip()
        try:
            job_id = validate_job_id(wanted.lower())
        except InvalidJobId:
            return self.task_search(request, wanted[:500])
        jobs = conf.get_jobs()
        queue = find_queue(jobs.connector, known_queues(jobs), job_id)
        if queue is not None:
            return HttpResponseRedirect(self.url("job", queue=queue, job_id=job_id))
        messages.warning(request, f"No job {job_id} in any known queue.")
        return HttpResponseRedirect(self.url("dashboard"))

    def task_search(self, request: HttpRequest, task: str) -> HttpResponse:
        """Where a task's jobs are: per queue and place, counted among each place's first
        ``task_filter.COUNT_MAX`` jobs, each linking to the list filtered by the task."""
        jobs = conf.get_jobs()
        found = []

        def counts(queue: str) -> list[int]:
            return [task_filter.counts(jobs, queue, s)[0].get(task, 0) for s in STATES]

        per_state, unreadable = per_queue(known_queues(jobs) if task else [], counts)
        for queue, why in unreadable.items():
            messages.warning(request, f"Cannot read queue {queue}: {why}")
        for queue, numbers in per_state.items():
            for state, count in zip(STATES, numbers, strict=True):
                if count:
                    link = self.url("list", queue=queue, state=state)
                    found.append((queue, state, count, f"{link}?{urlencode({'task': task})}"))
        if not found:
            messages.error(
                request,
                f"“{task[:80]}” is not a job id (a lowercase UUIDv7), and no job of a task "
                "by that name is in any known queue.",
            )
            return HttpResponseRedirect(self.url("dashboard"))
        context = self.context(request, f"Jobs of {task}", task=task, found=found)
        return render(request, "admin/echomq/task_search.html", context)

    @server_errors
    def job_action(
        self, request: HttpRequest, queue: str, job_id: str, action: str
    ) -> HttpResponseBase:
        """Retry, run now, cancel or delete one job."""
        chosen = self.chosen(request, JOB_ACTIONS, action)
        detail = self.url("job", queue=queue, job_id=job_id)
        after = detail if chosen.slug != "delete" else self.url("dashboard")
        return self.act(request, chosen, (queue, job_id), f"Job {job_id}", detail, after)

    @server_errors
    def queue_action(self, request: HttpRequest, queue: str, action: str) -> HttpResponseBase:
        """Retry all dead jobs of a queue, or purge a finished set: those its page counted."""
        chosen = self.chosen(request, QUEUE_ACTIONS, action)
        state = chosen.states[0]
        listing = self.url("list", queue=queue, state=state)
        bound = set_bound(conf.get_jobs(), queue, state, request.POST.get("bound"))
        subject = f"Queue {queue} ({plural(bound.count, f'{state} job')})"
        return self.act(request, chosen, (queue, bound), subject, listing, listing)

    def act(
        self,
        request: HttpRequest,
        action: Action,
        target: tuple[Any, ...],
        subject: str,
        cancel_url: str,
        after: str,
    ) -> HttpResponseBase:
        """Ask first when the action says so, run it, report it (the caller checked the permission)."""
        if request.method == "GET" and action.confirm:
            context = self.context(
                request, f"{action.label}: are you sure?", action=action, subject=subject,
                queue=target[0], cancel_url=cancel_url,
                next=request.GET.get("next", ""),
                bound=next((t.token() for t in target if isinstance(t, Bound)), ""),
            )  # fmt: skip
            return render(request, "admin/echomq/confirm.html", context)
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if action.confirm and request.POST.get("confirm") != "yes":
            return HttpResponseRedirect(request.path)  # not confirmed: ask first
        try:
            messages.success(request, action.run(conf.get_jobs(), *target))
        except ServerUnavailable:
            raise
        except JobNotFound as exc:  # deleted or trimmed meanwhile: its pages are gone too
            messages.error(request, f"{action.label} failed: {capfirst(str(exc))}")
            return HttpResponseRedirect(self.url("dashboard"))
        except EchoMQError as exc:
            messages.error(request, f"{action.label} failed: {capfirst(str(exc))}")
            return self.back(request, cancel_url)
        return self.back(request, after)
