"""The engine worker as a package: one concept per module, wired by ``worker.Worker``."""

from ..outcome import Failure, Handler, Outcome, Success, error_json, failure_from_exception
from .config import SWITCH_INTERVAL_S, WorkerConfig
from .stats import WorkerStats
from .supervisor import Supervisor
from .waiting import blocking_client
from .worker import Worker, default_worker_id

__all__ = [
    "SWITCH_INTERVAL_S",
    "Failure",
    "Handler",
    "Outcome",
    "Success",
    "Supervisor",
    "Worker",
    "WorkerConfig",
    "WorkerStats",
    "blocking_client",
    "default_worker_id",
    "error_json",
    "failure_from_exception",
]
