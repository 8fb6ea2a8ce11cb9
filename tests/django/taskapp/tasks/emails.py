from __future__ import annotations

from echomq_django.compat import task


@task(queue_name="emails", priority=10)
def send(to):
    return f"sent to {to}"
