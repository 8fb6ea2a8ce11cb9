"""Demo URLs: /demo/ (enqueue) and /demo/tasks/<id>/ (live status)."""

from django.urls import path

from . import views

app_name = "demo"

urlpatterns = [
    path("demo/", views.index, name="index"),
    path("demo/tasks/<str:result_id>/", views.status, name="status"),
    path("demo/tasks/<str:result_id>/status.json", views.status_json, name="status_json"),
]
