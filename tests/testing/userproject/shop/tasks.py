from datetime import timedelta

from django.db import DatabaseError, IntegrityError, connection
from django.db.models import F

from echomq_django.compat import task
from echomq_django.schedules import periodic

from .models import Order


class CardDeclined(Exception):
    pass


@task(queue_name="mail")
def send_receipt(order_id: int) -> str:
    Order.objects.filter(pk=order_id).update(receipt_sent=True)
    return f"receipt for {order_id}"


@task(backend="on_commit")
def notify(order_id: int) -> None:
    Order.objects.filter(pk=order_id).update(notified=True)


@task(backend="outbox")
def archive(order_id: int) -> None:
    Order.objects.filter(pk=order_id).update(archived=True)


@task(max_attempts=3, backoff=timedelta(minutes=5))
def charge(order_id: int, fail_times: int) -> int:
    """Fails ``fail_times`` times, then succeeds: a retried task."""
    Order.objects.filter(pk=order_id).update(charge_tries=F("charge_tries") + 1)
    tries = Order.objects.get(pk=order_id).charge_tries
    if tries <= fail_times:
        raise CardDeclined(f"try {tries}")
    return tries


@task(max_attempts=1)
def register(order_id: int) -> None:
    """Inserts a row whose key is taken: the database refuses the statement."""
    Order.objects.create(pk=order_id, email="taken@example.com")


@task
def register_quietly(order_id: int) -> str:
    """Swallows the refusal, as code that works under a worker's autocommit may."""
    try:
        Order.objects.create(pk=order_id, email="taken@example.com")
    except IntegrityError:
        return "taken"
    return "registered"


@task
def divide_quietly() -> str:
    """Raw SQL refused, and caught: PostgreSQL aborts the transaction (SQLite answers NULL)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")
    except DatabaseError:
        return "refused"
    return "answered"


@task
def broken() -> None:
    raise ValueError("broken on purpose")


@periodic("cleanup", every=timedelta(hours=1))
@task
def cleanup() -> int:
    return Order.objects.filter(receipt_sent=True).delete()[0]


@task
def forever(n: int) -> None:
    """Enqueues its own next run: drain() must stop, not spin."""
    forever.enqueue(n + 1)
