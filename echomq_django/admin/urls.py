"""The EchoMQ pages' URLs: validated path converters and the patterns of one admin site.

Queue names, states, job ids and schedule names in a URL are checked by a path
converter before any view runs: the keyspace validators raise ``ValueError``
subclasses, which Django's resolver takes as "no match", so an ill-formed one
is a 404 and never a key. Pattern names are prefixed ``echomq_`` and live in the
admin site's namespace (``admin:echomq_dashboard``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.urls import URLPattern, path, register_converter

from ..engine.keyspace import STATES, validate_job_id, validate_queue_name, validate_schedule_name

if TYPE_CHECKING:
    from .schedules import EchoMQScheduleAdmin


class _ValidatedConverter:
    """A path segment that must pass a keyspace validator (``ValueError``: no match)."""

    regex = r"[^/]+"
    validate: Callable[[object], str]

    def to_python(self, value: str) -> str:
        return type(self).validate(value)

    def to_url(self, value: str) -> str:
        return type(self).validate(value)


class QueueNameConverter(_ValidatedConverter):
    validate = staticmethod(validate_queue_name)


class JobIdConverter(_ValidatedConverter):
    validate = staticmethod(validate_job_id)


class ScheduleNameConverter(_ValidatedConverter):
    validate = staticmethod(validate_schedule_name)


class StateConverter:
    regex = "|".join(STATES)

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(QueueNameConverter, "emq_queue")
register_converter(JobIdConverter, "emq_job")
register_converter(ScheduleNameConverter, "emq_schedule")
register_converter(StateConverter, "emq_state")


def patterns(pages: EchoMQScheduleAdmin) -> list[URLPattern]:
    """The patterns relative to ``<admin>/echomq/``, each view behind the site's login."""
    wrap = pages.site.admin_view
    job = "queues/<emq_queue:queue>/jobs/<emq_job:job_id>/"
    return [
        path("", wrap(pages.dashboard), name="echomq_dashboard"),
        path("search/", wrap(pages.search), name="echomq_search"),
        path(
            "queues/<emq_queue:queue>/<emq_state:state>/", wrap(pages.job_list), name="echomq_list"
        ),
        path(job, wrap(pages.job_detail), name="echomq_job"),
        path(f"{job}<slug:action>/", wrap(pages.job_action), name="echomq_job_action"),
        path(
            "queues/<emq_queue:queue>/actions/<slug:action>/",
            wrap(pages.queue_action),
            name="echomq_queue_action",
        ),
        path("schedules/", wrap(pages.schedules), name="echomq_schedules"),
        path(
            "schedules/<emq_queue:queue>/<emq_schedule:name>/<slug:action>/",
            wrap(pages.schedule_action),
            name="echomq_schedule_action",
        ),
    ]
