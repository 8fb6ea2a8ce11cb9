"""URLs of the example project: the admin (EchoMQ's pages live under /admin/echomq/)."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import TemplateView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("project.demo.urls")),
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
]
