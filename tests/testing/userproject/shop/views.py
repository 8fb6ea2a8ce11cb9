from django.db import transaction
from django.http import JsonResponse

from .models import Order
from .tasks import archive, notify, send_receipt


def place_order(request):
    with transaction.atomic():
        order = Order.objects.create(email=request.POST["email"])
        receipt = send_receipt.enqueue(order.pk)  # sent at once, even if atomic() rolls back
        notify.enqueue(order.pk)  # ENQUEUE_ON_COMMIT: sent when the transaction commits
        archive.enqueue(order.pk)  # "outbox": written in the transaction, relayed after
    return JsonResponse({"order": order.pk, "receipt_job": receipt.id})
