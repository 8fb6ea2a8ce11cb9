"""Flow-control fixtures: the engine on the session Valkey, and worker processes.

``spawn``, ``valkey_url`` and ``valkey_jobs`` are the worker tests' own (tests/worker/conftest.py).
"""

from __future__ import annotations

from tests.worker.conftest import spawn, valkey_jobs, valkey_url, wait_until

__all__ = ["spawn", "valkey_jobs", "valkey_url", "wait_until"]
