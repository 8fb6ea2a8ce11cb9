"""EchoMQ adapter: a stub until the lead fills it in (see bench/README.md).

Skipped with a note while ``echomq_django.engine.jobs`` cannot be imported,
or while ``IMPLEMENTED`` is False. To fill it in, provide what every
:class:`~bench.adapters.base.PythonPeer` provides:

* ``setup(url)``: call ``super().setup(url)``, then build the engine's client
  objects (connector, ``Jobs``) on ``url``; nothing here is timed.
* ``_enqueue_noop()``: enqueue one no-op job (one EVALSHA).
* ``_enqueue_bulk(b)``: enqueue ``b`` no-op jobs with the bulk API
  (``Jobs.enqueue_many``).
* ``_enqueue_lat(ts_ms)``: enqueue one latency job whose payload carries
  ``ts_ms`` (float, ms since the epoch).
* ``worker_argv(i, latency)``: argv of one worker process. The worker's
  task function must call ``bench.tasks.probe.done(start_time)`` for a no-op
  job and ``bench.tasks.probe.latency(ts_ms)`` for a latency job (e.g. a
  ``bench/tasks/echomq_tasks.py`` module run by the engine's worker), with
  ``BENCH_URL`` / ``BENCH_N`` read from the environment.

Optional (item 6 of the issue, reported when present):

* ``claim_complete_rate(pending, n) -> float``: jobs/s for ``n`` claim+complete
  cycles with ``pending`` jobs waiting in the queue (10**4 and 10**6).
* ``admin_page_seconds(size) -> float``: seconds for one admin list page over a
  set of ``size`` jobs (10**6).
"""

from __future__ import annotations

from bench.adapters.base import PythonPeer, dist_version

IMPLEMENTED = False


class EchoMQAdapter(PythonPeer):
    key = "echomq"
    name = "EchoMQ"
    module = "echomq_django.engine.jobs"
    bulk_api = "Jobs.enqueue_many"
    notes = ()

    def available(self):
        try:
            import echomq_django.engine.jobs  # noqa: F401
        except Exception as e:
            return f"engine not importable ({type(e).__name__}: {e})"
        if not IMPLEMENTED:
            return "adapter pending (bench/adapters/echomq.py is a stub)"
        return None

    def version(self):
        return dist_version("echomq-django") or "working tree"


ADAPTER = EchoMQAdapter()
