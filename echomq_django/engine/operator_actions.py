"""The ``Jobs`` operator actions on one job (the admin's buttons, ``echomq``'s
subcommands): each one script call, whatever state the job is in."""

from __future__ import annotations

from . import script
from .connector import Connector
from .keyspace import QueueKeys
from .validation import one_line


class OperatorActions:
    """Mixed into ``Jobs``: one job's run now, cancel and delete over its connector."""

    connector: Connector

    def run_now(self, queue: str, job_id: str) -> None:
        keys = QueueKeys.of(queue)
        run_now = script.load("run_now")
        self.connector.run(run_now, run_now.keys_for(keys, job=job_id), [job_id])

    def cancel(self, queue: str, job_id: str, reason: str = "cancelled by an operator") -> str:
        """Stop the job: 'dead' at once if it waits; 'cancelling' if it runs (its worker
        stops it within about a second and sends it to dead; see cancel.lua)."""
        keys = QueueKeys.of(queue)
        one_line(reason, "reason", 200)
        cancel = script.load("cancel")
        return str(self.connector.run(cancel, cancel.keys_for(keys, job=job_id), [job_id, reason]))

    def delete(self, queue: str, job_id: str) -> str:
        """Remove the job and its row, whatever its state but running (``WrongState``:
        cancel it first). Returns the state it was in."""
        keys = QueueKeys.of(queue)
        delete = script.load("delete")
        return str(self.connector.run(delete, delete.keys_for(keys, job=job_id), [job_id]))
