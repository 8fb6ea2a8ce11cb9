"""How many jobs a worker holds beyond those it runs: the read-ahead policy.

Short jobs would wait for a claim's round trip between each other; so while jobs
are short, the worker holds more than it runs (``target``) and claims more while
they run (``worth_claiming``), in steps, so its executors never wait for a claim.
A slow job stops the read-ahead at once, and what is still held behind one is
given back (``GIVE_BACK_S``) for another worker to run.
"""

from __future__ import annotations

READ_AHEAD_BUDGET_MS = 50.0  # how long a read-ahead job may wait locally, on average
MAX_READ_AHEAD = 1000
# Jobs per claim call at most: a big read-ahead is refilled in steps, each claimed
# while the jobs before it run, so the executors never wait for a claim's round trip.
# Large enough that a claim's fixed cost (a round trip's worth of server and client
# work) is spread thin: with short jobs claims go out back to back.
CLAIM_STEP = 250
# A read-ahead job still waiting after this long sits behind a slow one: it is given
# back to pending (refunded) so that another worker can run it.
GIVE_BACK_S = 0.25


def target(slots: int, avg_ms: float | None, longest_run_ms: float) -> int:
    """Unfinished jobs to hold: one per slot, plus read-ahead while jobs are short.

    A job running now counts as long as it has run so far once that passes the
    read-ahead budget, so a slow job stops the read-ahead at once instead of after
    it ends. A shorter run is not a sign of anything: a job waiting for the GIL
    while a claim's reply is parsed has "run" for milliseconds.
    """
    if avg_ms is None:
        return slots
    if longest_run_ms < READ_AHEAD_BUDGET_MS:
        longest_run_ms = 0.0
    extra = int(slots * READ_AHEAD_BUDGET_MS / max(avg_ms, longest_run_ms, 0.01))
    return slots + min(extra, MAX_READ_AHEAD)


def worth_claiming(free: int, read_ahead: int, nothing_ready: bool) -> bool:
    """A claim step (or half the read-ahead, if less) is free, or nothing is left to
    start: claim now, while the rest runs."""
    return free > 0 and (free >= min(CLAIM_STEP, read_ahead / 2) or nothing_ready)
