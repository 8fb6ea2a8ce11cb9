"""One module per measured library; each exposes ``ADAPTER`` (see base.py)."""

import importlib

# Column order of the results table.
ORDER = ("echomq", "rq", "dramatiq", "celery", "huey", "bullmq")


def load(key):
    return importlib.import_module(f"bench.adapters.{key}").ADAPTER
