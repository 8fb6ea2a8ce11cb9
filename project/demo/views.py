"""Demo pages: enqueue tasks from a view, and watch one task's status live.

``index``   a form that enqueues ``send_welcome`` (inside ``transaction.atomic()``:
            with ENQUEUE_ON_COMMIT the job is sent when the block commits), and
            buttons that enqueue fast, slow, failing, scheduled, async and batch jobs.
``status``  the page of one task result; it polls ``status_json`` until the task is finished.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib import messages
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from echomq_django import conf
from echomq_django.compat import TaskResult, TaskResultDoesNotExist, TaskResultStatus, task_backends
from echomq_django.exceptions import PayloadError

from . import tasks
from .forms import WelcomeForm

BATCH_SIZE = 100

# What each button enqueues: (label, a function returning the TaskResults).
ACTIONS: dict[str, tuple[str, Callable[[], list[TaskResult]]]] = {
    "fast": ("A fast task", lambda: [tasks.add.enqueue(random.randint(1, 99), 1)]),
    "slow": ("A slow task (8 s)", lambda: [tasks.slow.enqueue(8)]),
    "failing": ("A failing task (3 attempts)", lambda: [tasks.always_fails.enqueue("boom")]),
    "unreliable": ("An unreliable task", lambda: [tasks.unreliable.enqueue(0.4)]),
    "scheduled": (
        "A task scheduled in 30 s",
        lambda: [tasks.add.using(run_after=timezone.now() + timedelta(seconds=30)).enqueue(2, 2)],
    ),
    "async": ("An async task", lambda: [tasks.fetch.enqueue(1.5)]),
    "batch": (
        f"A batch of {BATCH_SIZE} fast tasks",
        lambda: [tasks.add.enqueue(i, i) for i in range(BATCH_SIZE)],
    ),
}


@require_http_methods(["GET", "POST"])
def index(request: HttpRequest) -> HttpResponse:
    if request.method == "POST" and "action" in request.POST:
        return enqueue_action(request, request.POST["action"])
    form = WelcomeForm(request.POST or None)
    if form.is_valid():
        with transaction.atomic():  # with ENQUEUE_ON_COMMIT the job is sent at the commit
            result = tasks.send_welcome.enqueue(form.cleaned_data["email"])
        return redirect("demo:status", result_id=result.id)
    actions = [(name, label) for name, (label, _) in ACTIONS.items()]
    return render(request, "demo/index.html", {"form": form, "actions": actions})


def enqueue_action(request: HttpRequest, action: str) -> HttpResponse:
    """One button: a single job opens its status page, a batch comes back here."""
    if action not in ACTIONS:
        messages.error(request, f"Unknown action {action[:40]!r}.")
        return redirect("demo:index")
    label, enqueue = ACTIONS[action]
    results = enqueue()
    if len(results) == 1:
        return redirect("demo:status", result_id=results[0].id)
    messages.success(request, f"Enqueued {len(results)} jobs ({label.lower()}).")
    return redirect("demo:index")


def lookup(result_id: str) -> TaskResult:
    """The result, or 404 for an unknown, expired or ill-formed id."""
    try:
        return task_backends["default"].get_result(result_id)
    except (TaskResultDoesNotExist, PayloadError) as exc:
        raise Http404(f"no task result {result_id!r}") from exc


def place(result: TaskResult) -> dict[str, Any]:
    """The job's place in its queue, in the admin's words (READY is either pending or
    scheduled), and when a scheduled one is due: a retry's backoff has an end time."""
    job = conf.get_jobs().find([result.task.queue_name], result.id)
    if job is None:
        return {"place": None, "next_run_at": None}
    due = job.due_ms if job.state == "scheduled" and job.due_ms else None
    return {
        "place": job.state,
        "next_run_at": datetime.fromtimestamp(due / 1000, UTC).isoformat() if due else None,
    }


@require_GET
def status(request: HttpRequest, result_id: str) -> HttpResponse:
    return render(request, "demo/status.html", {"result": as_dict(lookup(result_id))})


@require_GET
def status_json(request: HttpRequest, result_id: str) -> JsonResponse:
    return JsonResponse(as_dict(lookup(result_id)))


def as_dict(result: TaskResult) -> dict[str, Any]:
    """What the status page shows (JSON-ready)."""

    def when(moment):
        return moment.isoformat() if moment else None

    return {
        "id": result.id,
        "task": result.task.module_path,
        "queue": result.task.queue_name,
        "priority": result.task.priority,
        "run_after": when(result.task.run_after),
        "status": result.status.value,
        **place(result),
        "is_finished": result.is_finished,
        "attempts": result.attempts,
        "worker_ids": result.worker_ids,
        "enqueued_at": when(result.enqueued_at),
        "started_at": when(result.started_at),
        "last_attempted_at": when(result.last_attempted_at),
        "finished_at": when(result.finished_at),
        "args": result.args,
        "kwargs": result.kwargs,
        "return_value": (
            result.return_value if result.status == TaskResultStatus.SUCCESSFUL else None
        ),
        "errors": [
            {"exception_class_path": e.exception_class_path, "traceback": e.traceback}
            for e in result.errors
        ],
    }
