"""What ``manage.py echomq`` prints: pure views, data in, rich renderable out, and
the console they are printed on.

Data is shown as data: the views put server text in as it is, and ``DataConsole``
escapes every string it renders (control characters through ``printable``) and
reads none as markup. One point for every cell, title and line: a view or a
column added later cannot forget it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group, JustifyMethod
from rich.table import Table
from rich.text import Text

from .engine.jobs import Job, QueueStats
from .engine.keyspace import STATES
from .engine.limits import GateState
from .engine.times import from_ms, from_us
from .management import printable
from .queue_totals import COUNTERS, event_totals


class DataConsole(Console):
    """A console for server data: every string it renders is escaped, none is markup.

    Rows, registry entries and exception texts are data anyone who can write to
    the server (or any task) fills: an ESC sequence in one would clear the
    operator's screen or forge a hyperlink, a bidi override rewrite what a cell
    seems to say, ``[link=...]`` be read as markup. Rich turns every string it
    is given (a table's cells, titles, captions; a printed line) into text
    through ``render_str``: escaping there covers them all.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options, markup=False, emoji=False, highlight=False)

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(printable(text), **options)


def stats_view(stats: Sequence[QueueStats], every: float | None = None) -> Group:
    """Two tables, one row per queue: jobs in each state now; event counters so far."""
    when = from_ms(stats[0].now_ms) if stats else None
    caption = f"server time {when:%Y-%m-%d %H:%M:%S} UTC" if when else "no queue known yet"
    if every:
        caption += f" · every {every:g}s, Ctrl-C to stop"
    now = Table(title="Jobs by state")
    events = Table(title="Events since the queue was created", caption=caption)
    for table in (now, events):
        table.add_column("queue", style="bold")
    for state in STATES:
        now.add_column(state, justify="right")
    for suffix, _, _ in COUNTERS:
        events.add_column(suffix, justify="right")
    for s in stats:
        now.add_row(s.queue, *(str(s.counts[state]) for state in STATES))
        events.add_row(s.queue, *map(str, event_totals(s).values()))
    return Group(now, events)


def _when_us(value: int | None) -> str:
    moment = from_us(value)
    return "" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S.%f} UTC"


def _when_ms(value: int | None) -> str:
    return "" if value is None else _when_us(value * 1000)


def job_view(job: Job, payload_limit: int = 1000) -> Table:
    """The row as field / value, times in UTC, the payload cut at ``payload_limit``; the
    errors' tracebacks are ``job_tracebacks``, printed below it (a table folds them)."""
    payload = job.payload
    if len(payload) > payload_limit:
        payload = payload[:payload_limit] + f" … ({len(job.payload)} characters; --json shows all)"
    rows = [
        ("queue", job.queue),
        ("id", job.id),
        ("state", job.state),
        ("task", job.task),
        ("priority", str(job.priority)),
        ("attempts", f"{job.counted_attempts} of {job.max_attempts} (token {job.token})"),
        ("enqueued", _when_us(job.enqueued_at)),
        ("started", _when_us(job.started_at)),
        ("last attempt", _when_us(job.last_attempted_at)),
        ("finished", _when_us(job.finished_at)),
        ("due", _when_ms(job.due_ms)),
        ("lease deadline", _when_ms(job.lease_deadline)),
        ("worker", job.worker),
        ("workers", ", ".join(job.worker_ids)),
        ("last error", job.last_error),
        ("result", job.result or ""),
        ("payload", payload),
    ]
    table = Table(title=f"job {job.id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name, value in rows:
        if value:
            table.add_row(name, value)
    for number, error in enumerate(job_errors(job), 1):
        table.add_row(f"error {number}", error["exception_class_path"] or "?")
    return table


def job_tracebacks(job: Job) -> str:
    """Each error's traceback as plain lines, as written (copyable: print it with
    ``soft_wrap``, never folded)."""
    return "".join(
        f"\nerror {number}: {error['exception_class_path'] or '?'}\n{error['traceback'].rstrip()}\n"
        for number, error in enumerate(job_errors(job), 1)
    )


def job_errors(job: Job) -> list[dict[str, Any]]:
    """The row's error records (``Job.error_records``), as the admin's job page has them."""
    return job.error_records


def ping_view(report: dict[str, Any]) -> Table:
    rtt = report["rtt_ms"]
    missing = [name for name, cached in report["scripts"].items() if not cached]
    cache = f"{len(report['scripts']) - len(missing)}/{len(report['scripts'])} scripts cached"
    if missing:
        cache += f"; not yet loaded (on first use): {', '.join(missing)}"
    table = Table(title=f"EchoMQ server {report['url']}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("server", f"{report['product']} {report['version']} ({report['mode']})")
    table.add_row(
        "round trip",
        f"min {rtt['min']:.3f} ms · median {rtt['median']:.3f} ms · max {rtt['max']:.3f} ms"
        f" ({rtt['samples']} PINGs)",
    )
    table.add_row("script cache", cache)
    return table


def limits_view(limits: dict[str, list[GateState]]) -> list[Table]:
    """One row per limit of each queue (none: no table): tokens or running, and waiting."""
    rows = [(queue, gate) for queue, gates in limits.items() for gate in gates]
    if not rows:
        return []
    table = Table(title="Limits (held-back jobs stay pending, counted here, not above)")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("queue", "left"), ("limit", "left"), ("rule", "left"),
        ("tokens / running", "right"), ("waiting", "right"),
    )  # fmt: skip
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for queue, gate in rows:
        level = f"{gate.level:.1f} tokens" if gate.kind == "rate" else f"{gate.level:.0f} running"
        if gate.keys is not None:
            level += f" ({gate.keys} keys)"
        table.add_row(queue, gate.name, gate.describe, level, str(gate.waiting))
    return [table]
