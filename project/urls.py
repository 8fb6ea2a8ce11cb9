"""URLs of the example project: the admin (EchoMQ's pages live under /admin/echomq/),
and the Prometheus endpoint (staff users, or ECHOMQ["METRICS_TOKEN"] as a bearer token).
"""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import TemplateView

import echomq_django.metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics/echomq", echomq_django.metrics.prometheus_view, name="echomq-metrics"),
    path("", include("project.demo.urls")),
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
]
