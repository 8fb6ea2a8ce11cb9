"""The no-op task of bench/outbox.py (a module of its own: the backend finds it by path)."""

from echomq_django.compat import task


@task
def noop(n):
    return n
