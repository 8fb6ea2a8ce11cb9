"""The supervisor's own duties, on real servers: what it does with a dead child's jobs,
how it shares max_jobs and a burst among its children, how it gives up on a child that
cannot start, and the board it reads what runs from.

The end-to-end tests (real ``runworker``-like processes, real signals) are in
``test_supervisor.py``; here the accounting is driven exactly: a child's copy of leases
and its board are set as a dead child would leave them, and the supervisor's ending
of them goes through the real scripts.
"""

from __future__ import annotations

import math
import socket
import time
from multiprocessing.connection import Connection
from types import SimpleNamespace

import pytest

from echomq_django.engine.jobs import Claimed, Jobs, NewJob
from echomq_django.engine.worker import Supervisor
from echomq_django.engine.worker.board import Board
from echomq_django.engine.worker.config import WorkerConfig, deal_sizes
from echomq_django.engine.worker.lease import Lease
from echomq_django.engine.worker.link import Link
from echomq_django.engine.worker.subworker import Subworker
from tests.support.running import RunningWorker

SETUP = "tests.support.engine_proc:setup"


def _copies(jobs: Jobs, n: int, worker: str) -> list[Lease]:
    """``n`` jobs claimed as a supervised child claims them (marked started, isolated),
    and the supervisor's copies of their leases."""
    ids = [jobs.enqueue("q", NewJob(payload="{}")).id for _ in range(n)]
    claim = jobs.claim("q", worker, count=n, start_now=n, isolated=True)
    assert [c.id for c in claim.jobs] == ids
    leases = []
    for index, c in enumerate(claim.jobs, start=1):
        lease = Lease(c, 30_000, renewed_at=time.monotonic(), armed=True, index=index)
        leases.append(lease)
    return leases


def _dead_child(board: Board, leases: list[Lease], killed_for=None) -> Subworker:
    """A Subworker as its reader hands it over once its process is gone."""
    sub = Subworker(0, {}, board.threads, events=None, on_exit=lambda s: None)  # type: ignore[arg-type]
    sub.board = board
    sub.leases = {lease.index: lease for lease in leases}
    sub.popen = SimpleNamespace(returncode=-9, pid=1)  # type: ignore[assignment]
    sub.killed_for = killed_for
    return sub


@pytest.fixture
def supervisor(valkey_jobs):
    sup = Supervisor(valkey_jobs, ["q"], setup=SETUP, setup_args={}, processes=1, name="sup")
    yield sup
    for sub in sup._subworkers:
        sub.close()


def test_the_one_job_running_in_a_dead_child_is_charged_its_crash(valkey_jobs, supervisor):
    jobs = valkey_jobs
    running, waiting = _copies(jobs, 2, "sup")
    board = Board.create(threads=1, capacity=8)
    board.begin(0, running.index, running.claimed.token, time.monotonic() - 0.5)
    supervisor._ended(_dead_child(board, [running, waiting]))
    first, second = jobs.get("q", running.claimed.id), jobs.get("q", waiting.claimed.id)
    assert (first.state, first.crashes, first.solo) == ("pending", 1, True)
    assert first.error_list[0]["exception_class_path"].endswith("WorkerCrashed")
    # It never began: back free, not solo, and the run its claim marked is taken back.
    assert (second.state, second.crashes, second.solo, second.started) == (
        "pending", 0, False, False
    )  # fmt: skip
    assert second.worker_ids == () and second.counted_attempts == 0


def test_jobs_running_side_by_side_in_a_dead_child_go_back_solo_uncharged(valkey_jobs, supervisor):
    jobs = valkey_jobs
    leases = _copies(jobs, 3, "sup")
    board = Board.create(threads=2, capacity=8)
    for thread, lease in enumerate(leases[:2]):
        board.begin(thread, lease.index, lease.claimed.token, time.monotonic() - 0.5)
    board.held(leases[2].index)
    supervisor._ended(_dead_child(board, leases))
    rows = [jobs.get("q", lease.claimed.id) for lease in leases]
    assert [(r.state, r.solo, r.crashes, r.error_list) for r in rows[:2]] == [
        ("pending", True, 0, [])
    ] * 2  # either could have been the cause: each runs alone next
    assert (rows[2].state, rows[2].solo, rows[2].counted_attempts) == ("pending", False, 0)


def test_a_job_that_ran_and_ended_in_a_dead_child_keeps_its_run(valkey_jobs, supervisor):
    """It finished, but its completion had not gone out: back to pending (it runs again),
    free, its run counted (began on the board)."""
    jobs = valkey_jobs
    (lease,) = _copies(jobs, 1, "sup")
    board = Board.create(threads=1, capacity=8)
    board.begin(0, lease.index, lease.claimed.token, time.monotonic())
    board.end(0)
    supervisor._ended(_dead_child(board, [lease]))
    row = jobs.get("q", lease.claimed.id)
    assert (row.state, row.solo, row.crashes, row.worker_ids) == ("pending", False, 0, ("sup",))


@pytest.mark.parametrize("stop", ["TimeLimitExceeded", "Cancelled"])
def test_a_job_whose_child_was_killed_for_it_fails_as_such_and_its_neighbour_goes_back_free(
    valkey_jobs, supervisor, stop
):
    jobs = valkey_jobs
    stuck, beside = _copies(jobs, 2, "sup")
    board = Board.create(threads=2, capacity=8)
    board.begin(0, stuck.index, stuck.claimed.token, time.monotonic() - 5)
    board.begin(1, beside.index, beside.claimed.token, time.monotonic() - 1)
    supervisor._ended(_dead_child(board, [stuck, beside], killed_for=(stuck.key, stop)))
    row, other = jobs.get("q", stuck.claimed.id), jobs.get("q", beside.claimed.id)
    assert row.error_list[-1]["exception_class_path"] == f"echomq_django.engine.errors.{stop}"
    assert row.state == ("dead" if stop == "Cancelled" else "scheduled")
    # Killed by the supervisor, not by itself: not solo, not charged.
    assert (other.state, other.solo, other.crashes, other.error_list) == ("pending", False, 0, [])


def test_a_torn_record_on_the_board_is_not_read():
    board = Board.create(threads=2, capacity=8)
    board.begin(0, 3, 7, 1.5)
    board.begin(1, 4, 9, 2.5)
    assert [tuple(run) for run in board.running()] == [(3, 7, 1.5), (4, 9, 2.5)]
    board._memory[32] = 1  # thread 1's sequence number odd: a write under way
    assert [tuple(run) for run in board.running()] == [(3, 7, 1.5)]
    assert board.began(3) and board.began(4) and not board.began(5)
    board.held(3)  # a new lease takes the place: its run has not begun
    assert not board.began(3)
    board.close()


def test_a_child_that_stopped_itself_unrenewed_gives_its_jobs_back_uncharged(
    valkey_jobs, supervisor
):
    """Its supervisor renewed its leases no more (frozen): the child ended itself and
    marked the board; the job it ran did nothing wrong: back free, not solo."""
    jobs = valkey_jobs
    running, waiting = _copies(jobs, 2, "sup")
    board = Board.create(threads=1, capacity=8)
    board.begin(0, running.index, running.claimed.token, time.monotonic() - 0.5)
    board.give_up()
    supervisor._ended(_dead_child(board, [running, waiting]))
    rows = [jobs.get("q", lease.claimed.id) for lease in (running, waiting)]
    assert [(r.state, r.solo, r.crashes, r.error_list) for r in rows] == [
        ("pending", False, 0, [])
    ] * 2


def test_a_child_must_stop_by_its_supervisors_stamp_or_by_its_claims_lease():
    board = Board.create(threads=1, capacity=8)
    ours, theirs = socket.socketpair()
    link = Link(Connection(ours.detach()), board)
    assert link.stop_by() == math.inf  # nothing held
    lease = Lease(Claimed("q", "a", 1, None), 2_000, renewed_at=0.0)
    link.hold("q", 100.0, [lease])
    assert link.stop_by() == 101.5  # the supervisor has not read it: its claim's lease
    board.stamp(150.0, 1)  # renewed: it vouches for the lease
    assert link.stop_by() == 150.0
    link.hold("q", 200.0, [Lease(Claimed("q", "b", 1, None), 40_000, renewed_at=0.0)])
    assert link.stop_by() == 150.0  # the new one's own is later
    board.stamp(145.0, 2)  # the supervisor's stamp only ever covers what it has read
    assert link.stop_by() == 145.0
    link.gone([lease])
    board.stamp(math.inf, 2)
    assert link.stop_by() == math.inf
    board._memory[board._stamp_at] = 1  # a write under way that never ends (frozen in it)
    assert board.renewed() == (0.0, 0) and link.stop_by() == 239.0
    theirs.close()
    board.close()


@pytest.mark.slow
def test_a_child_that_cannot_be_set_up_stops_the_supervisor_with_its_reason(valkey_jobs):
    sup = Supervisor(
        valkey_jobs, ["q"], setup="tests.support.engine_proc:broken_setup",
        setup_args={}, processes=1,
    )  # fmt: skip
    started = time.monotonic()
    RunningWorker(sup).stats(timeout=60)
    assert sup.fatal and "before it was set up" in sup.fatal
    assert time.monotonic() - started < 30


@pytest.mark.slow
def test_max_jobs_is_shared_by_the_children_and_burst_ends_with_the_queues(valkey_jobs, valkey_url):
    jobs = valkey_jobs
    jobs.enqueue_many("q", [NewJob(payload="{}") for _ in range(9)])
    sup = Supervisor(
        jobs, ["q"], setup=SETUP, setup_args={"url": valkey_url}, processes=2, max_jobs=5,
    )  # fmt: skip
    stats = RunningWorker(sup).stats(timeout=60)
    assert (stats.claimed, stats.completed) == (5, 5)
    assert jobs.stats("q").counts["pending"] == 4
    burst = Supervisor(
        jobs, ["q"], setup=SETUP, setup_args={"url": valkey_url}, processes=2, burst=True,
    )  # fmt: skip
    assert RunningWorker(burst).stats(timeout=60).completed == 4
    assert jobs.stats("q").counts["completed"] == 9


def test_the_sized_queues_slots_are_dealt_to_the_children():
    assert deal_sizes(["a", "b"], {"a": 3, "b": 1}, per_child=2, processes=2) == [
        {"a": 2}, {"a": 1, "b": 1}
    ]  # fmt: skip
    config = WorkerConfig(("a", "rest"), concurrency=2, sizes={"a": 2}, processes=2)
    first, second = config.for_child(0, None), config.for_child(1, None)
    assert (first.queues, first.sizes) == (("a", "rest"), {"a": 1})
    assert (second.queues, second.sizes) == (("a", "rest"), {"a": 1})
    # A child whose slots the sized queues take whole serves only those.
    config = WorkerConfig(("a", "rest"), concurrency=1, sizes={"a": 1}, processes=2)
    assert [config.for_child(n, None).queues for n in (0, 1)] == [("a",), ("rest",)]
    with pytest.raises(ValueError, match="leaving none for rest"):
        WorkerConfig(("a", "rest"), concurrency=1, sizes={"a": 2}, processes=2)
