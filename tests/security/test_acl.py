"""The documented least-privilege ACL is what the code sends: worker, reaper, admin and
CLI all run as that user, on db 3, and on a cluster while a queue's slot migrates.

The old list lacked ``select`` (every URL with a db other than 0 failed every
call) and ``asking`` (no ASK redirect could be followed during resharding), and
granted commands nothing sends. Here the server's own statistics say which
commands the restricted user ran: every one the client part of the list names
is among them, none was refused, and ``ACL LOG`` holds no denial.
"""

from __future__ import annotations

import signal
import subprocess

import pytest
import redis
from django.core import checks

from echomq_django import conf
from echomq_django.devserver import server_product, server_version
from echomq_django.engine import registry
from echomq_django.engine.acl import CLIENT_COMMANDS, granted_commands, worker_acl_rules
from echomq_django.engine.jobs import NewJob
from echomq_django.engine.keyspace import new_job_id
from tests.cli.conftest import echomq_cmd, manage_py
from tests.django import settings as django_settings
from tests.django.tasks import echo, fail
from tests.support import servers
from tests.support.cluster import migrate_keys, slot_of
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db
WORKER_SETTINGS = "tests.django.settings"


def version_of(binary: str) -> tuple[int, int]:
    if server_product(binary) == "valkey":
        return (7, 2)  # Valkey started from Redis 7.2: it has every command of 7.2
    major, minor, *_ = server_version(binary).split(".")
    return int(major), int(minor)


def command_stats(acl) -> dict[str, tuple[int, int]]:
    """cmdstat_<name> -> (calls, rejected_calls), read as the admin user."""
    stats = {}
    for line in acl.server.command("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, _, rest = line[8:].partition(":")
            fields = dict(kv.split("=") for kv in rest.split(","))
            stats[name] = (int(fields["calls"]), int(fields.get("rejected_calls", 0)))
    return stats


@pytest.fixture
def acl_db3(server, make_acl_server, settings):
    """The server's binary with the minimal ACL user; settings aimed at it on db 3."""
    acl = make_acl_server(worker_acl_rules(server=version_of(server.binary)), binary=server.binary)
    acl.server.command("CONFIG", "RESETSTAT")
    url = acl.url.removesuffix("/0") + "/3"
    settings.ECHOMQ = {"URL": url, "QUEUES": ["default", "emails"]}
    settings.TASKS = django_settings.TASKS
    conf.reset()
    yield acl, url
    conf.reset()


def test_worker_reaper_admin_and_cli_run_as_the_minimal_user_on_db_3(acl_db3, admin_client):
    acl, url = acl_db3
    jobs = conf.get_jobs()
    tail = manage_py(
        "echomq", "tail", "--json", url=url, settings=WORKER_SETTINGS, wait=False,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert "following" in tail.stderr.readline()  # its start is set: it sees the jobs below
    done = echo.enqueue("hello")
    failed = fail.using(queue_name="default").enqueue("for the dead list")
    lost = jobs.enqueue("emails", NewJob(payload="{}", lease_ms=1))
    jobs.claim("emails", "crashed-worker", lease_ms=1)

    reaper = manage_py("runreaper", "--once", url=url, settings=WORKER_SETTINGS)
    assert reaper.returncode == 0, reaper.stderr
    assert jobs.get("emails", lost.id).state == "pending"
    worker = manage_py(
        "runworker", "default", "--name", "acl-worker", url=url, settings=WORKER_SETTINGS,
        wait=False, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:  # it runs both jobs, then waits on the server (BZPOPMIN) and heartbeats
        wait_until(lambda: done.refresh() or done.status == "SUCCESSFUL", timeout=30)
        wait_until(lambda: failed.refresh() or failed.status == "FAILED", timeout=30)
        wait_until(lambda: registry.list_workers(jobs.connector), timeout=30)
        # A blocking read is counted when it returns: await the end of one idle wait.
        wait_until(lambda: command_stats(acl).get("bzpopmin", (0, 0))[0] > 0, timeout=30)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 0, stderr
    tail.send_signal(signal.SIGTERM)
    tail_out, tail_err = tail.communicate(timeout=30)
    assert tail.returncode == 0, tail_err
    assert done.id in tail_out  # the workers' events, read as the minimal user

    assert admin_client.get("/admin/echomq/").status_code == 200
    assert admin_client.get("/admin/echomq/queues/default/dead/").status_code == 200
    assert admin_client.get(f"/admin/echomq/queues/default/jobs/{failed.id}/").status_code == 200
    search = admin_client.get("/admin/echomq/search/", {"id": failed.id})
    assert search.status_code == 302 and failed.id in search["Location"]
    assert admin_client.get(f"/admin/echomq/search/?id={new_job_id()}").status_code == 302
    for args in (("ping",), ("stats",), ("workers",), ("inspect", done.id)):
        echomq_cmd(*args)
    assert echomq_cmd("retry-dead", "default", "--json").json()["retried"] == 1
    echomq_cmd("purge", "default", "completed", "--yes")
    deleted = admin_client.post(
        f"/admin/echomq/queues/default/jobs/{failed.id}/delete/", {"confirm": "yes"}
    )
    assert deleted.status_code == 302
    found = checks.run_checks(include_deployment_checks=True, tags=["echomq"])
    assert "echomq.W012" not in [m.id for m in found]  # INFO is granted

    stats = command_stats(acl)
    admin_only = {"config|resetstat", "acl|setuser", "info", "auth"}  # this test, as admin
    refused = {name for name, (_, rejected) in stats.items() if rejected}
    # Not granted on purpose: CONFIG GET would read requirepass too. With AOF off, the
    # deploy checks try it for the RDB schedule and say it cannot be read (W010).
    assert refused <= {"config|get"}, f"refused by the ACL: {refused}"
    assert {"echomq.W010"} <= {m.id for m in found}
    denials = acl.server.command("ACL", "LOG")
    assert all("config|get" in str(entry) for entry in denials), denials
    used = {name for name, (calls, _) in stats.items() if calls}
    granted = granted_commands(version_of(acl.server.binary))
    assert used - admin_only <= granted
    assert set(CLIENT_COMMANDS) & granted <= used, "granted, but nothing sent it"
    admin = redis.Redis.from_url(acl.admin_url)
    assert admin.dbsize() == 0, "db 0 holds nothing: everything went to db 3"
    assert admin.select(3) and admin.dbsize() > 0
    admin.close()


@pytest.fixture
def two_masters():
    cluster = servers.start_valkey_cluster(2)
    for node in cluster.nodes:
        node.command("ACL", "SETUSER", "echomq", "reset", "on", ">pw", *worker_acl_rules().split())
    yield cluster
    cluster.stop()


def test_the_minimal_user_follows_ask_while_a_slot_migrates(two_masters, settings, admin_client):
    source, target = two_masters.nodes
    queue = next(q for q in ("emails", "reports", "bulk", "orders") if slot_of(q) <= 8191)
    slot = slot_of(queue)
    url = f"redis+cluster://echomq:pw@{source.host}:{source.port}/0"
    settings.ECHOMQ = {"URL": url, "QUEUES": [queue]}
    conf.reset()
    jobs = conf.get_jobs()
    ids = [e.id for e in jobs.enqueue_many(queue, [NewJob(payload="{}") for _ in range(3)])]
    held = jobs.claim(queue, "w", count=2, lease_ms=60_000).jobs
    source_id, target_id = (n.command("CLUSTER", "MYID") for n in (source, target))
    target.command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    source.command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    assert migrate_keys(source, target, slot) > 3
    # The source answers ASK: the client sends ASKING to the target, then the call.
    assert jobs.get(queue, held[0].id).state == "active"
    assert not [r for r in jobs.extend_many([(queue, c.id, c.token, 60_000) for c in held])
                if isinstance(r, Exception)]  # fmt: skip
    assert jobs.page(queue, "active").total == 2
    # The admin and the CLI, as that user, while the slot is half moved.
    detail = admin_client.get(f"/admin/echomq/queues/{queue}/jobs/{held[0].id}/")
    assert detail.status_code == 200 and "active" in detail.content.decode()
    # A list's counts name keys the target does not hold yet: the cluster answers TRYAGAIN,
    # the page says the server is unavailable (503), never NOPERM or a 500.
    listing = admin_client.get(f"/admin/echomq/queues/{queue}/active/")
    assert listing.status_code == 503 and "NOPERM" not in listing.content.decode()
    search = admin_client.get("/admin/echomq/search/", {"id": held[1].id})
    assert search.status_code == 302 and held[1].id in search["Location"]
    assert echomq_cmd("inspect", held[0].id, "--json").json()["state"] == "active"
    for node in (target, source):
        node.command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
    replies = jobs.complete_many([(queue, c.id, c.token, "null") for c in held])
    assert not [r for r in replies if isinstance(r, Exception)]
    assert jobs.stats(queue).counts["completed"] == 2 and len(ids) == 3
    for node in (source, target):
        assert node.command("ACL", "LOG") == [], node
    conf.reset()
