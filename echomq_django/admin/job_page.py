"""A job's page in the EchoMQ admin: everything its row holds, and its actions.

The row is read whole, as stored (``read_stored``: one round trip, whatever the
key holds), and read as a job of its key (``Job.of_key``); each text is cut only
as it is shown. A key that is not a job's row (another type, a missing field, an
id that is not its key's) gets a page that says what is wrong, shows the fields
raw, and offers Delete: the only way out of a corrupt row.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from .. import conf
from ..engine.errors import CorruptRow
from ..engine.jobs import Job
from ..engine.stored import StoredRow, cut, read_stored
from ..engine.times import MS, US, from_server
from .actions import JOB_ACTIONS
from .pages import EchoMQAdmin, server_errors
from .presenters import ShownPayload, bad_time, error_list, pretty_json


class EchoMQJobAdmin(EchoMQAdmin):
    """The EchoMQ pages, plus a job's page."""

    @server_errors
    def job_detail(self, request: HttpRequest, queue: str, job_id: str) -> HttpResponse:
        """Everything the row holds; a row that is not a valid job is shown raw."""
        self.require(request, "view")
        stored = read_stored(conf.get_connector(), queue, job_id)
        if not stored.exists:
            raise Http404(f"no job {job_id} in queue {queue}")
        if stored.type != "hash":
            problem = f"its key holds a {stored.type}, not a row (a HASH)"
            return self.corrupt(request, queue, job_id, stored, problem)
        try:
            job = Job.of_key(queue, job_id, stored.row)  # whole: each text is cut as shown
        except CorruptRow as exc:
            return self.corrupt(request, queue, job_id, stored, str(exc))
        result, result_is_json = pretty_json(job.result)
        shown = replace(
            job, task=cut(job.task), run_after=cut(job.run_after), worker=cut(job.worker),
            last_error=cut(job.last_error), idempotency_key=cut(job.idempotency_key),
        )  # fmt: skip
        context = self.context(
            request,
            cut(job.task) or f"Job {job.id}",
            queue=queue,
            job_id=job_id,  # the key's: what the actions act on
            job=shown,
            payload=ShownPayload.of(job.payload),
            result=result,
            result_is_json=result_is_json,
            errors=error_list(job),
            times=self.job_times(job),
            actions=self.allowed(request, JOB_ACTIONS, job.state),
            list_url=self.url("list", queue=queue, state=job.state),
        )
        return render(request, "admin/echomq/job_detail.html", context)

    def corrupt(
        self, request: HttpRequest, queue: str, job_id: str, stored: StoredRow, problem: str
    ) -> HttpResponse:
        """The page of a row that is not a job: what is wrong, what it holds, Delete."""
        deletable = self.model_admin.has_delete_permission(request)  # the only way out
        context = self.context(
            request, f"Job {job_id}", queue=queue, job_id=job_id, problem=problem,
            raw=stored.fields, actions=[JOB_ACTIONS["delete"]] if deletable else [],
        )  # fmt: skip
        return render(request, "admin/echomq/job_corrupt.html", context)

    @staticmethod
    def job_times(job: Job) -> list[tuple[str, datetime | None, str]]:
        """(label, moment, why it cannot be shown) of each of the row's times."""
        return [
            (label, from_server(value, scale), bad_time(value, scale))
            for label, value, scale in (
                ("Enqueued", job.enqueued_at, US),
                ("Due", job.due_ms, MS),
                ("First started", job.started_at, US),
                ("Last attempted", job.last_attempted_at, US),
                ("Lease deadline", job.lease_deadline, MS),
                ("Finished", job.finished_at, US),
            )
        ]
