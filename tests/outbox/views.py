"""A view that writes a row and enqueues its job in one transaction, as a shop would."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from tests.outbox import tasks


@csrf_exempt
def order(request: HttpRequest) -> JsonResponse:
    a, b = int(request.POST["a"]), int(request.POST["b"])
    with transaction.atomic():
        group = Group.objects.create(name=f"order-{a}-{b}")  # the "order" row
        result = tasks.add.enqueue(a, b)
    return JsonResponse({"order": group.pk, "job": result.id})
