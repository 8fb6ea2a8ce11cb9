"""``manage.py echomq``: every subcommand, as text and as --json, on the real servers."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import time

import pytest
from django.core.management.base import CommandError

from echomq_django import conf
from echomq_django.devserver import free_port
from echomq_django.engine import registry, script
from echomq_django.engine.acl import worker_acl_rules
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.keyspace import new_job_id
from tests.cli.conftest import echomq_cmd, enqueue, make_completed, make_dead, manage_py
from tests.support import servers


def rows(text: str) -> dict[str, list[str]]:
    """The body rows of rich tables, by their first cell."""
    found = {}
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if cells and cells[0]:
            found.setdefault(cells[0], cells[1:])
    return found


# ---------------------------------------------------------------------------------------
# stats
# ---------------------------------------------------------------------------------------


def test_stats_json_counts_every_known_queue(jobs):
    make_dead(jobs, "default", 2)
    enqueue(jobs, "default", 3)
    enqueue(jobs, "reports", 1)  # not in settings: known through the registry
    by_queue = {s["queue"]: s for s in echomq_cmd("stats", "--json").json()}
    assert sorted(by_queue) == ["default", "emails", "reports"]
    assert by_queue["default"]["counts"] == {
        "pending": 3,
        "scheduled": 0,
        "active": 0,
        "completed": 0,
        "dead": 2,
    }
    assert by_queue["default"]["metrics"]["enqueued"] == 5
    assert by_queue["emails"]["counts"]["pending"] == 0


def test_stats_table_has_a_row_per_queue_and_a_column_per_state(jobs):
    enqueue(jobs, "default", 3)
    make_completed(jobs, "emails", 1)
    text = echomq_cmd("stats").out
    table = rows(text)
    assert table["queue"][:5] == ["pending", "scheduled", "active", "completed", "dead"]
    assert table["default"][:5] == ["3", "0", "0", "0", "0"]
    assert table["emails"][:5] == ["0", "0", "0", "1", "0"]
    assert "Events since" in text and "server time" in text


def test_stats_of_named_queues_only(jobs):
    enqueue(jobs, "reports", 2)
    [only] = echomq_cmd("stats", "reports", "--json").json()
    assert only["queue"] == "reports" and only["counts"]["pending"] == 2


def test_stats_refuses_a_bad_queue_name(jobs):
    with pytest.raises(CommandError, match="invalid queue name"):
        echomq_cmd("stats", "bad{name}")


def test_stats_watch_cannot_be_json(jobs):
    with pytest.raises(CommandError, match="--watch"):
        echomq_cmd("stats", "--watch", "--json")


def test_stats_watch_redraws_until_ctrl_c(valkey_server):
    proc = manage_py(
        "echomq", "stats", "--watch", "0.2", url=valkey_server.url, wait=False,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        seen, deadline = "", time.monotonic() + 30
        while seen.count("Jobs by state") < 2 and time.monotonic() < deadline:
            seen += proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert seen.count("Jobs by state") >= 2, err
    assert proc.returncode == 0, err


# ---------------------------------------------------------------------------------------
# inspect
# ---------------------------------------------------------------------------------------


def test_inspect_finds_the_job_in_any_known_queue(jobs):
    enqueue(jobs, "default", 2)
    [job_id] = make_dead(jobs, "emails", 1)
    found = echomq_cmd("inspect", job_id, "--json").json()
    assert found["id"] == job_id and found["queue"] == "emails"
    assert found["state"] == "dead" and found["attempts"] == 1
    [error] = found["errors"]
    assert isinstance(error.pop("at_us"), int) and error.pop("worker") == "w1"  # when, where
    assert error == {"exception_class_path": "builtins.ValueError", "traceback": "ValueError: boom"}


def test_inspect_shows_the_row_as_a_table(jobs):
    [job_id] = make_dead(jobs, "default", 1)
    table = rows(echomq_cmd("inspect", job_id).out)
    assert table["id"] == [job_id]
    assert table["state"] == ["dead"]
    assert table["attempts"] == ["1 of 1 (token 1)"]
    assert table["last error"] == ["ValueError: boom"]
    assert table["error 1"] == ["builtins.ValueError"]
    assert table["enqueued"][0].endswith("UTC")


def test_inspect_cuts_a_long_payload_in_the_table_only(jobs):
    job_id = jobs.enqueue("default", NewJob(payload="x" * 5000)).id
    assert "5000 characters; --json shows all" in echomq_cmd("inspect", job_id).out
    assert len(echomq_cmd("inspect", job_id, "--json").json()["payload"]) == 5000


def test_inspect_with_queue_looks_only_there(jobs):
    [job_id] = enqueue(jobs, "emails", 1)
    with pytest.raises(
        CommandError, match=f"job {job_id} is in none of the queues searched: default"
    ):
        echomq_cmd("inspect", job_id, "--queue", "default")
    assert echomq_cmd("inspect", job_id, "--queue", "emails", "--json").json()["id"] == job_id


def test_inspect_of_an_unknown_job_names_the_queues_searched(jobs):
    with pytest.raises(CommandError, match="none of the queues searched: default, emails"):
        echomq_cmd("inspect", new_job_id())


@pytest.mark.parametrize("bad", ["nope", "01234567-89ab-4def-8123-456789abcdef", "A" * 36])
def test_inspect_refuses_an_ill_formed_id(jobs, bad):
    with pytest.raises(CommandError, match="invalid job id"):
        echomq_cmd("inspect", bad)


# ---------------------------------------------------------------------------------------
# retry-dead and purge: bulk operations in bounded calls
# ---------------------------------------------------------------------------------------


def test_retry_dead_moves_every_dead_job_in_bounded_calls(jobs):
    make_dead(jobs, "default", 7)
    report = echomq_cmd("retry-dead", "default", "--batch", "3", "--json").json()
    assert report == {"queue": "default", "retried": 7, "calls": 3}
    counts = jobs.stats("default").counts
    assert counts["dead"] == 0 and counts["pending"] == 7


def test_retry_dead_of_chosen_ids_only(jobs):
    first, second = make_dead(jobs, "default", 2)
    out = echomq_cmd("retry-dead", "default", first).out
    assert out.strip() == "1 dead job(s) of default back to pending."
    assert jobs.get("default", first).state == "pending"
    assert jobs.get("default", second).state == "dead"


def test_bulk_operations_draw_a_progress_bar_on_a_terminal(jobs, monkeypatch):
    make_dead(jobs, "default", 5)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats the output as a terminal
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    out = echomq_cmd("retry-dead", "default", "--batch", "2").out
    assert "retry dead jobs of default" in out and "5/5" in out
    assert "5 dead job(s) of default back to pending." in out


def test_purge_asks_first_and_a_no_deletes_nothing(jobs, monkeypatch):
    make_completed(jobs, "default", 3)
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    with pytest.raises(CommandError, match="purge cancelled: nothing was deleted"):
        echomq_cmd("purge", "default", "completed")
    assert jobs.stats("default").counts["completed"] == 3


def test_purge_on_yes_deletes_the_rows(jobs, monkeypatch):
    ids = make_completed(jobs, "default", 3)
    monkeypatch.setattr("sys.stdin", io.StringIO("yes\n"))
    result = echomq_cmd("purge", "default", "completed")
    assert "Delete all 3 completed job(s) of queue default?" in result.err
    assert result.out.strip() == "Purged 3 completed job(s) of default."
    assert all(jobs.get("default", i) is None for i in ids)


def test_end_of_input_is_a_no(jobs, monkeypatch):
    make_dead(jobs, "default", 1)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(CommandError, match="cancelled"):
        echomq_cmd("purge", "default", "dead")


@pytest.mark.parametrize("flag", ["--yes", "--no-input", "--noinput"])
def test_purge_without_asking(jobs, flag):
    make_dead(jobs, "default", 5)
    enqueue(jobs, "default", 2)  # pending: not touched by a purge of dead
    report = echomq_cmd("purge", "default", "dead", flag, "--batch", "2", "--json").json()
    assert report == {"queue": "default", "state": "dead", "purged": 5, "calls": 3}
    counts = jobs.stats("default").counts
    assert counts["dead"] == 0 and counts["pending"] == 2  # nothing else touched


def test_purge_only_finished_states(jobs):
    with pytest.raises(CommandError, match="invalid choice: 'pending'"):
        echomq_cmd("purge", "default", "pending", "--yes")


# ---------------------------------------------------------------------------------------
# ping and workers
# ---------------------------------------------------------------------------------------


def test_ping_reports_version_latency_and_script_cache(jobs, server, redis_client):
    redis_client.script_flush()
    jobs.stats("default")  # loads stats.lua, nothing else
    report = echomq_cmd("ping", "--count", "3", "--json").json()
    assert report["product"] == server.product and report["version"] == server.version
    assert report["mode"] == "standalone" and report["primaries"] == 1
    assert report["rtt_ms"]["samples"] == 3
    assert 0 < report["rtt_ms"]["min"] <= report["rtt_ms"]["median"] <= report["rtt_ms"]["max"]
    assert set(report["scripts"]) == {s.name for s in script.all_scripts()}
    assert report["scripts"]["stats"] is True and report["scripts"]["reap"] is False


def test_ping_table_lists_the_scripts_not_yet_loaded(jobs, server, redis_client):
    redis_client.script_flush()
    table = rows(echomq_cmd("ping").out)
    assert table["server"][0].startswith(f"{server.product} {server.version}")
    assert "ms" in table["round trip"][0]
    total = len(script.all_scripts())
    assert table["script cache"][0].startswith(f"0/{total} scripts cached; not yet loaded")


def test_ping_on_a_cluster(settings, valkey_cluster, cluster_client):
    servers.flush_cluster(valkey_cluster, scripts=True)  # other tests loaded scripts there
    host, port = valkey_cluster.startup_nodes[0]
    settings.ECHOMQ = {"URL": f"redis+cluster://{host}:{port}/0"}
    conf.reset()
    try:
        report = echomq_cmd("ping", "--json").json()
    finally:
        conf.reset()
    assert report["mode"] == "cluster" and report["primaries"] == 3
    assert not any(report["scripts"].values())


def test_an_unreachable_server_is_a_command_error(settings):
    settings.ECHOMQ = {"URL": f"redis://127.0.0.1:{free_port()}/0"}
    conf.reset()
    for args in (["ping"], ["stats"], ["workers", "--json"]):
        with pytest.raises(CommandError, match="cannot reach the EchoMQ server at redis://"):
            echomq_cmd(*args)
    conf.reset()


def heartbeat(jobs, worker_id: str, queues: list[str], running: list[str], **more) -> None:
    now = time.time()
    info = registry.WorkerInfo(
        id=worker_id, host="box-1", pid=4242, queues=queues, concurrency=4,
        running=running, started_at=now - 300, last_seen=now, **more,
    )  # fmt: skip
    registry.heartbeat(jobs.connector, info, ttl_s=30)


def test_workers_lists_the_registry(jobs):
    heartbeat(jobs, "w-b", ["default", "emails"], [new_job_id()])
    heartbeat(jobs, "w-a", ["slow"], [])
    listed = echomq_cmd("workers", "--json").json()
    assert [w["id"] for w in listed] == ["w-a", "w-b"]
    assert listed[1]["queues"] == ["default", "emails"] and len(listed[1]["running"]) == 1
    table = rows(echomq_cmd("workers").out)
    assert table["w-b"][:4] == ["box-1", "4242", "default, emails", "1/4"]
    assert table["w-a"][4:] == ["5m", "0s ago"]


def test_workers_show_queue_sizes_and_processes(jobs):
    heartbeat(jobs, "w-c", ["default", "slow"], [], sizes={"slow": 1}, processes=2)
    (listed,) = echomq_cmd("workers", "--json").json()
    assert (listed["queues"], listed["sizes"], listed["processes"]) == (
        ["default", "slow"],
        {"slow": 1},
        2,
    )
    assert rows(echomq_cmd("workers").out)["w-c"][2:4] == ["default, slow:1", "0/4 in 2 processes"]


def test_workers_with_none_running(jobs):
    assert echomq_cmd("workers", "--json").json() == []
    assert "0 live" in echomq_cmd("workers").out


# ---------------------------------------------------------------------------------------
# From the command line: exit status
# ---------------------------------------------------------------------------------------


def test_exit_status_is_non_zero_for_bad_input_and_for_a_missing_server(valkey_server):
    bad_id = manage_py("echomq", "inspect", "nope", url=valkey_server.url)
    assert bad_id.returncode == 2 and "invalid job id 'nope'" in bad_id.stderr
    down = manage_py("echomq", "ping", url=f"redis://127.0.0.1:{free_port()}/0")
    assert down.returncode == 1 and "cannot reach the EchoMQ server" in down.stderr


def test_the_operator_commands_run_under_the_minimal_acl(settings, make_acl_server):
    acl = make_acl_server(worker_acl_rules())
    settings.ECHOMQ = {"URL": acl.url, "QUEUES": ["default"]}
    conf.reset()
    try:
        jobs = conf.get_jobs()
        make_dead(jobs, "default", 2)
        heartbeat(jobs, "w-acl", ["default"], [])
        assert echomq_cmd("ping", "--json").json()["version"]
        [stats] = echomq_cmd("stats", "--json").json()
        assert stats["counts"]["dead"] == 2
        assert [w["id"] for w in echomq_cmd("workers", "--json").json()] == ["w-acl"]
        assert echomq_cmd("retry-dead", "default", "--json").json()["retried"] == 2
        assert echomq_cmd("purge", "default", "completed", "--yes", "--json").json()["purged"] == 0
    finally:
        conf.reset()


@pytest.mark.parametrize(
    "args",
    [
        ("retry-dead", "default", "--batch", "10001"),
        ("purge", "default", "dead", "--yes", "--batch", "99999999999"),
        ("jobs", "default", "dead", "--limit", "501"),
        ("ping", "--count", "100000000"),
        ("ping", "--count", "0"),
    ],
)
def test_a_count_past_the_engines_bound_is_refused_naming_its_option(jobs, args):
    """Refused at parse time, before any call: never an engine error naming ``limit``."""
    with pytest.raises(CommandError, match=r"argument --\w+: .*at least 1") as refused:
        echomq_cmd(*args)
    assert "limit must be" not in str(refused.value)
