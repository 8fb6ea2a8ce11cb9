"""The connector on a real Valkey Cluster: per-node script cache, lost replies,
slot-local scripts, pipelines over several nodes, and a live resharding.
"""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from echomq_django.engine import script
from echomq_django.engine.connector import Call, Connector
from echomq_django.engine.errors import ScriptError, ServerUnavailable, StaleToken
from echomq_django.engine.jobs import Jobs, NewJob
from echomq_django.engine.keyspace import QueueKeys, new_job_id
from tests.support import servers
from tests.support.cluster import SPREAD, info_field, migrate_keys, node_of, slot_of
from tests.support.waiting import wait_until

# -- no CROSSSLOT by construction ---------------------------------------------------------


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}", fullmatch=True))
def test_every_key_of_a_queue_is_in_the_queue_slot(queue):
    keys = QueueKeys.of(queue)
    names = [
        keys.base, keys.pending, keys.scheduled, keys.active, keys.completed, keys.dead,
        keys.metrics, keys.seq, keys.wake, keys.job(new_job_id()), keys.throughput(29_000_000),
        keys.idempotency("0" * 64),
    ]  # fmt: skip
    assert {key_slot(k.encode()) for k in names} == {slot_of(queue)}


# A script that writes one declared key and one key it builds itself from ARGV.
STRAY = script.Script(
    "stray",
    "redis.call('SET', KEYS[1], '1')\n"
    "redis.call('SET', 'emq:{' .. ARGV[1] .. '}:stray', '1')\n"
    "return 'ok'\n",
)


def test_a_script_touching_another_slot_is_refused_by_the_cluster(cluster_connector, valkey_server):
    """Invariant 5 is checked by the server: keys a script may not touch fail the call.

    A key built from the queue's own prefix (same hash tag) is fine, as the engine's
    row keys are. A key of a slot served by another node is refused ("non local
    key"), and so are declared keys of two slots (CROSSSLOT; redis-py's cluster
    client refuses those before sending, a node pipeline gets the server's reply).
    A standalone server checks none of this, hence the engine suite on the cluster.
    (A key of another slot on the same node is not refused for scripts without a
    shebang: that case is left to the static check in tests/engine/test_scripts_static.py.)
    """
    declared = [QueueKeys.of("emails").base + "declared"]
    assert node_of_key(cluster_connector, "emails") != node_of_key(cluster_connector, "billing")
    assert cluster_connector.run(STRAY, declared, ["emails"]) == "ok"
    with pytest.raises(ScriptError, match="non local key"):
        cluster_connector.run(STRAY, declared, ["billing"])
    two_slots = [*declared, QueueKeys.of("reports").base + "declared"]
    (reply,) = cluster_connector.run_many([Call(STRAY, two_slots, ["emails"])])
    assert isinstance(reply, ScriptError) and "same slot" in str(reply)
    standalone = Connector.from_url(valkey_server.url)
    assert standalone.run(STRAY, two_slots, ["billing"]) == "ok"


def node_of_key(connector: Connector, queue: str) -> str:
    return connector.client.get_node_from_key(QueueKeys.of(queue).base).name


# -- the script cache is per node -----------------------------------------------------------


def script_loads(node) -> int:
    stats = node.command("INFO", "commandstats")
    line = next((ln for ln in stats.splitlines() if ln.startswith("cmdstat_script|load:")), "")
    return int(line.split("calls=")[1].split(",")[0]) if line else 0


def test_script_flush_on_one_node_reloads_there_and_nowhere_else(valkey_cluster, jobs):
    connector = jobs.connector
    for queue in SPREAD:  # every script used below is cached on every node
        jobs.enqueue(queue, NewJob(payload="{}"))
        (c,) = jobs.claim(queue, "w").jobs
        jobs.complete(queue, c.id, c.token)
    flushed = node_of(valkey_cluster, SPREAD[1])
    flushed.command("SCRIPT", "FLUSH")
    before, on_node = connector.script_loads, script_loads(flushed)

    for queue in (SPREAD[0], SPREAD[2]):  # other nodes: nothing to load
        jobs.enqueue(queue, NewJob(payload="{}"))
    assert connector.script_loads == before

    job = jobs.enqueue(SPREAD[1], NewJob(payload="{}"))  # NOSCRIPT there: load, run again
    (c,) = jobs.claim(SPREAD[1], "w").jobs
    jobs.complete(SPREAD[1], c.id, c.token)
    assert jobs.get(SPREAD[1], job.id).state == "completed"
    assert connector.script_loads == before + 3  # enqueue, claim, complete: once each
    assert script_loads(flushed) == on_node + 3


def test_a_pipeline_over_three_nodes_after_a_flush_on_one(valkey_cluster, jobs):
    """run_many: one pipeline per node, replies in call order, NOSCRIPT on one node healed."""
    claimed = []
    for queue in SPREAD:
        jobs.enqueue_many(queue, [NewJob(payload="{}") for _ in range(2)])
        claimed += jobs.claim(queue, "w", count=2, lease_ms=5_000).jobs
    node_of(valkey_cluster, SPREAD[2]).command("SCRIPT", "FLUSH")
    items = [(c.queue, c.id, c.token, 60_000) for c in claimed]
    items.insert(3, (claimed[0].queue, claimed[0].id, claimed[0].token + 1, 60_000))  # stale
    replies = jobs.extend_many(items)
    assert isinstance(replies.pop(3), StaleToken)
    assert not [r for r in replies if isinstance(r, Exception)]
    done = jobs.complete_many([(c.queue, c.id, c.token, "null") for c in claimed])
    assert not [r for r in done if isinstance(r, Exception)]
    assert all(jobs.stats(q).counts["completed"] == 2 for q in SPREAD)


# -- a lost reply is not re-sent ------------------------------------------------------------


def test_a_transition_whose_reply_is_lost_is_not_sent_again(valkey_cluster, cluster_url, jobs):
    """The cluster client re-sends after a timeout unless told not to: a claim would run twice.

    The queue's node sleeps (DEBUG SLEEP) while a claim with a short socket
    timeout waits; the claim times out, and only the one that was sent runs.
    """
    queue = SPREAD[0]
    jobs.enqueue_many(queue, [NewJob(payload="{}") for _ in range(5)])
    impatient = Jobs(Connector.from_url(cluster_url, socket_timeout=0.2))
    impatient.stats(queue)  # connected, scripts loaded
    node = node_of(valkey_cluster, queue)
    sleeper = threading.Thread(target=node.command, args=("DEBUG", "SLEEP", "1"))
    sleeper.start()
    time.sleep(0.1)
    with pytest.raises(ServerUnavailable):
        impatient.claim(queue, "impatient", count=1)
    sleeper.join()
    assert jobs.stats(queue).counts["active"] <= 1


# -- resharding -----------------------------------------------------------------------------


@pytest.fixture
def own_cluster():
    """A 2-master cluster of this test's own: resharding changes its slot map."""
    cluster = servers.start_valkey_cluster(2)
    yield cluster
    cluster.stop()


def test_a_queue_keeps_working_while_its_slot_moves_to_another_node(own_cluster):
    """Move a queue's slot (IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE) under a live Connector.

    Between MIGRATE and SETSLOT NODE the old owner answers ASK: a call whose keys all
    exist follows it to the new owner; one that names a key that does not exist yet
    gets TRYAGAIN (Redis Cluster refuses multi-key calls it cannot place during a
    migration): ServerUnavailable, and nothing ran. After SETSLOT NODE the old owner
    answers MOVED. The new owner has never seen the scripts (NOSCRIPT). Single calls
    and pipelines go on through the same Connector; nothing is lost or run twice.
    """
    source, target = own_cluster.nodes
    queue = next(q for q in ("emails", "reports", "bulk", "orders") if slot_of(q) <= 8191)
    slot = slot_of(queue)
    first = source.host, source.port
    jobs = Jobs(Connector.from_url(f"redis+cluster://{first[0]}:{first[1]}/0"))
    ids = [e.id for e in jobs.enqueue_many(queue, [NewJob(payload="{}") for _ in range(6)])]
    held = jobs.claim(queue, "w", count=2, lease_ms=60_000).jobs
    target.command("SCRIPT", "FLUSH")
    source_id, target_id = (n.command("CLUSTER", "MYID") for n in (source, target))

    target.command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    source.command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    assert migrate_keys(source, target, slot) > 6
    # ASK: the source no longer has the keys; the target serves them after ASKING.
    assert jobs.get(queue, held[0].id).state == "active"
    extended = jobs.extend_many([(queue, c.id, c.token, 60_000) for c in held])  # a pipeline
    assert not [r for r in extended if isinstance(r, Exception)]
    with pytest.raises(ServerUnavailable):  # redis-py: "TTL exhausted" after TRYAGAINs
        jobs.complete(queue, held[0].id, held[0].token)  # names the "completed" set: absent
    assert jobs.get(queue, held[0].id).state == "active"

    for node in (target, source):
        node.command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
    # MOVED: the client follows it and learns the new owner.
    rest = jobs.claim(queue, "w", count=10).jobs
    replies = jobs.complete_many([(queue, c.id, c.token, "null") for c in [*held, *rest]])
    assert not [r for r in replies if isinstance(r, Exception)]
    assert jobs.stats(queue).counts == {
        "pending": 0, "scheduled": 0, "active": 0, "completed": len(ids), "dead": 0
    }  # fmt: skip
    assert {c.id for c in [*held, *rest]} == set(ids)
    assert source.command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    assert target.command("CLUSTER", "COUNTKEYSINSLOT", slot) > len(ids)
    assert jobs.connector.client.get_node_from_key(QueueKeys.of(queue).base).port == target.port


# -- failover -------------------------------------------------------------------------------


def test_a_queue_keeps_working_after_a_failover(cluster_with_replica):
    """A failover under a live Connector: MOVED to the promoted replica, which has
    never loaded a script (scripts are not replicated): NOSCRIPT, loaded once, run."""
    master, replica = cluster_with_replica
    connector = Connector.from_url(f"redis+cluster://{master.host}:{master.port}/0")
    jobs = Jobs(connector)
    queue = SPREAD[0]
    ids = [e.id for e in jobs.enqueue_many(queue, [NewJob(payload="{}") for _ in range(4)])]
    held = jobs.claim(queue, "w", count=2, lease_ms=60_000).jobs
    wait_until(lambda: int(info_field(master, "replication", "master_repl_offset"))
               == int(info_field(replica, "replication", "slave_repl_offset")))  # fmt: skip

    replica.command("CLUSTER", "FAILOVER")  # coordinated: the master pauses, then hands over
    wait_until(lambda: info_field(replica, "replication", "role") == "master")
    wait_until(lambda: info_field(master, "replication", "role") == "slave")
    loads = connector.script_loads

    replies = jobs.extend_many([(queue, c.id, c.token, 60_000) for c in held])  # a pipeline
    assert not [r for r in replies if isinstance(r, Exception)]
    rest = jobs.claim(queue, "w", count=10).jobs
    done = jobs.complete_many([(queue, c.id, c.token, "null") for c in [*held, *rest]])
    assert not [r for r in done if isinstance(r, Exception)]
    assert jobs.stats(queue).counts["completed"] == len(ids)
    assert connector.script_loads > loads  # the new primary needed the bodies
    assert connector.client.get_node_from_key(QueueKeys.of(queue).base).port == replica.port
