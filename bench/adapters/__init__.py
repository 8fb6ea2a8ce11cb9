"""One module per measured library; each exposes ``ADAPTER`` (see base.py)."""

import importlib

# Column order of the results table.
ORDER = ("echomq", "vtasks", "threadmill", "djhuey", "rq", "dramatiq", "celery", "huey", "bullmq")
# The Django Tasks backends (the same @task, enqueue() / aenqueue() from Django).
DJANGO_TASKS = ("echomq", "vtasks", "threadmill", "djhuey")


def load(key):
    return importlib.import_module(f"bench.adapters.{key}").ADAPTER
