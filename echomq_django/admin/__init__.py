"""EchoMQ in the Django admin.

Registering the unmanaged ``Queue`` model puts "EchoMQ" on the admin index and
gives its permissions a home. ``mount`` then serves the EchoMQ pages at
``<admin>/echomq/`` ahead of the site's own app index for this app, so the
"EchoMQ" link lands on the dashboard. The default site is mounted here; a
project with its own ``AdminSite`` calls ``mount(its_site)``.

The package is the admin's: ``urls`` (converters and patterns), ``pages`` (the
views), ``job_page`` (a job's page), ``schedules`` (the schedules page), ``actions`` (the operator actions),
``presenters`` (what a page shows of a row) and ``chart`` (throughput as SVG).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import URLPattern, URLResolver, include, path, reverse

from ..models import Queue
from . import urls
from .schedules import EchoMQScheduleAdmin

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Queue]
else:  # ModelAdmin takes no type argument at run time
    _ModelAdmin = admin.ModelAdmin


class QueueAdmin(_ModelAdmin):
    """Holds the permissions; its only page, the changelist, leads to the dashboard.

    ``Queue`` has no table, so the usual add/change/history/delete pages (which
    would query it) are not routed at all.
    """

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_changelist"
        return [path("", self.admin_site.admin_view(self.changelist_view), name=name)]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:echomq_dashboard"))


_mounted: weakref.WeakSet[admin.AdminSite] = weakref.WeakSet()


def mount(site: admin.AdminSite) -> None:
    """Serve the EchoMQ pages at ``<site>/echomq/`` (idempotent; registers ``Queue``)."""
    if site in _mounted:
        return
    if not site.is_registered(Queue):
        site.register(Queue, QueueAdmin)
    site_urls = site.get_urls

    def get_urls() -> list[URLResolver | URLPattern]:
        pages = EchoMQScheduleAdmin(site, site.get_model_admin(Queue))
        return [path(f"{Queue._meta.app_label}/", include(urls.patterns(pages))), *site_urls()]

    # The instance's get_urls, wrapped: a project's own AdminSite subclass keeps its URLs.
    site.get_urls = get_urls  # type: ignore[method-assign]
    _mounted.add(site)


mount(admin.site)
