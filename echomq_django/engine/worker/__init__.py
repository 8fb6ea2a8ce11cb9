"""The engine worker as a package: one concept per module, wired by ``worker.Worker``."""

from ..outcome import Failure, Handler, Outcome, Success, error_json, failure_from_exception
from .stats import WorkerStats
from .waiting import blocking_client
from .worker import Worker, default_worker_id

__all__ = [
    "Failure",
    "Handler",
    "Outcome",
    "Success",
    "Worker",
    "WorkerStats",
    "blocking_client",
    "default_worker_id",
    "error_json",
    "failure_from_exception",
]
