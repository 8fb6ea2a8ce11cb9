from django.urls import path

from tests.outbox import views

urlpatterns = [path("order/", views.order)]
