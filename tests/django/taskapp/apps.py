"""With ECHOMQ_SIGNAL_LOG set (the contract suite's workers), every task signal is
written to that file as one JSON line, so the test process can read what a worker
process sent."""

from __future__ import annotations

import json
import os
import threading

from django.apps import AppConfig

_lock = threading.Lock()


class TaskAppConfig(AppConfig):
    name = "tests.django.taskapp"
    label = "echomq_taskapp"

    def ready(self) -> None:
        path = os.environ.get("ECHOMQ_SIGNAL_LOG")
        if not path:
            return
        from echomq_django.compat import task_enqueued, task_finished, task_started

        for name, signal in (
            ("enqueued", task_enqueued),
            ("started", task_started),
            ("finished", task_finished),
        ):
            signal.connect(_recorder(path, name), weak=False)


def _recorder(path: str, name: str):
    def record(sender, task_result, **kwargs) -> None:
        line = json.dumps(signal_entry(name, sender, task_result))
        with _lock, open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")

    return record


def signal_entry(name: str, sender: type, task_result) -> dict:
    """One signal as both the worker's log and the test process record it."""
    return {
        "signal": name,
        "sender": f"{sender.__module__}.{sender.__qualname__}",
        "id": task_result.id,
        "status": str(task_result.status),
        "attempts": task_result.attempts,
        "worker_ids": list(task_result.worker_ids),
    }
