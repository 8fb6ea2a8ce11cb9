"""System checks (configuration, reachability) and the deploy checks on real servers."""

from __future__ import annotations

import copy

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from echomq_django import conf
from echomq_django.checks import check_server, check_settings
from echomq_django.devserver import free_port
from echomq_django.engine.connector import Connector
from echomq_django.engine.errors import InvalidURL
from echomq_django.server_checks import check_server_deploy, server_findings, server_warnings
from tests.django.tasks import echo

BACKEND = "echomq_django.backends.EchoMQBackend"


def ids(messages) -> list[str]:
    return [m.id for m in messages]


@pytest.fixture
def good_settings(settings, url, redis_client):
    settings.ECHOMQ = {"URL": url, "QUEUES": ["default", "emails"]}
    settings.TASKS = {
        "default": {
            "BACKEND": BACKEND,
            # "slow": the installed demo app's tasks module uses it, and `check` imports
            # the tasks modules (for their @periodic schedules) when nothing did before.
            "QUEUES": ["default", "emails", "slow"],
            "OPTIONS": {"MAX_ATTEMPTS": 5, "ENQUEUE_ON_COMMIT": True},
        }
    }
    conf.reset()
    yield settings
    conf.reset()


# ---------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------


def test_a_good_configuration_passes_every_check(good_settings):
    assert check_settings() == []
    assert check_server() == []


def test_echomq_must_be_a_dict(good_settings):
    good_settings.ECHOMQ = "redis://localhost"
    [message] = check_settings()
    assert message.id == "echomq.E001" and message.level == checks.ERROR
    assert message.hint


def test_unknown_echomq_keys_are_an_error(good_settings):
    good_settings.ECHOMQ = {**good_settings.ECHOMQ, "QUEUS": ["x"]}
    [message] = check_settings()
    assert message.id == "echomq.E002"
    assert "'QUEUS'" in message.msg and "QUEUES" in message.hint


def test_a_missing_url_warns_that_the_default_is_used(good_settings):
    good_settings.ECHOMQ = {"QUEUES": ["default"]}
    [message] = check_settings()
    assert message.id == "echomq.W001" and message.level == checks.WARNING
    assert conf.DEFAULT_URL in message.msg


@pytest.mark.parametrize(
    "bad_url",
    [
        "http://example.com",
        "localhost:6379",
        6379,
        "redis://:s3cr[et@127.0.0.1:1/0",  # an unquoted '[' parses as an IPv6 host
        "redis://:s3cret@127.0.0.1:1/0?socket_timeout=abc",  # options redis-py refuses
        "redis://:s3cret@127.0.0.1:1/0?db=x",
        "redis+cluster://:s3cret@127.0.0.1:1?health_check_interval=soon",
    ],
)
def test_a_url_the_connector_cannot_use_is_an_error(good_settings, bad_url):
    good_settings.ECHOMQ = {"URL": bad_url}
    [message] = check_settings()
    assert message.id == "echomq.E003" and "s3cr" not in message.msg
    assert check_server() == []  # no connection attempt with an unusable URL
    if isinstance(bad_url, str) and bad_url.startswith("redis"):
        with pytest.raises(InvalidURL) as refused:  # a clear error, never a traceback of redis-py's
            Connector.from_url(bad_url)
        assert "s3cr" not in str(refused.value)


def backend_messages(settings):
    """What Django's tasks check reports for the backends built from ``settings.TASKS``."""
    from echomq_django.compat import task_backends

    settings.TASKS = copy.deepcopy(settings.TASKS)  # setting_changed: backends are rebuilt
    return [m for backend in task_backends.all() for m in backend.check()]


def test_unknown_backend_options_are_an_error(good_settings):
    good_settings.TASKS["default"]["OPTIONS"] = {"MAX_ATTEMPTS": 3, "MAX_ATEMPTS": 3}
    [message] = backend_messages(good_settings)
    assert message.id == "echomq.E004"
    assert "'MAX_ATEMPTS'" in message.msg and "MAX_ATTEMPTS" in message.hint


def test_bad_backend_option_values_are_an_error_not_a_crash(good_settings):
    good_settings.TASKS["default"]["OPTIONS"] = {"LEASE": -5}
    [message] = backend_messages(good_settings)
    assert message.id == "echomq.E006" and "lease" in message.msg


def test_options_of_other_backends_are_not_ours_to_judge(good_settings):
    good_settings.TASKS = {
        "default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
        "other": {"BACKEND": "no.such.Backend", "OPTIONS": {"WHATEVER": 1}},
    }
    assert check_settings() == []


@pytest.mark.parametrize("bad", ["a{b}", "", "with space", "x" * 101])
def test_invalid_queue_names_are_an_error_in_either_setting(good_settings, bad):
    good_settings.ECHOMQ = {**good_settings.ECHOMQ, "QUEUES": ["default", bad]}
    good_settings.TASKS["default"]["QUEUES"] = [bad]
    [message] = check_settings()
    assert message.id == "echomq.E005" and "ECHOMQ['QUEUES']" in message.msg
    [message] = backend_messages(good_settings)
    assert message.id == "echomq.E005" and "TASKS['default']['QUEUES']" in message.msg


def test_a_queue_list_given_as_a_string_is_an_error(good_settings):
    # tuple("default") would silently be seven one-letter queues
    good_settings.ECHOMQ = {**good_settings.ECHOMQ, "QUEUES": "default"}
    [message] = check_settings()
    assert message.id == "echomq.E005" and "list of queue names" in message.msg


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("MAX_PAYLOAD", "big", "MAX_PAYLOAD'] must be a positive number of bytes"),
        ("MAX_PAYLOAD", 0, "MAX_PAYLOAD'] must be a positive number of bytes"),
        ("MAX_PAYLOAD", -1, "MAX_PAYLOAD'] must be a positive number of bytes"),
        ("MAX_PAYLOAD", None, "MAX_PAYLOAD'] must be a positive number of bytes"),
        ("OPTIONS", None, "OPTIONS'] must be a dict, not NoneType"),
        ("OPTIONS", ["socket_timeout", 5], "OPTIONS'] must be a dict, not list"),
        ("CLUSTER", "false", "CLUSTER'] must be True or False, not 'false'"),
    ],
)
def test_a_value_of_the_wrong_type_is_an_error_not_a_crash_nor_another_key(
    good_settings, key, value, message
):
    """A check that crashed took `manage.py check` down; one that blamed DURABLE_ENQUEUE
    sent the reader to the wrong key; a MAX_PAYLOAD of 0 refused every job."""
    good_settings.ECHOMQ = {**good_settings.ECHOMQ, key: value}
    [problem] = check_settings()
    assert problem.id == "echomq.E008" and message in problem.msg
    assert check_server() == []  # not "the server does not answer"
    with pytest.raises(ImproperlyConfigured, match=message):
        echo.enqueue(1)


def test_a_max_payload_written_as_digits_is_still_read(good_settings):
    good_settings.ECHOMQ = {**good_settings.ECHOMQ, "MAX_PAYLOAD": "1000"}
    assert check_settings() == []
    assert conf.get_jobs().max_payload == 1000


def test_an_unreachable_server_is_a_warning_with_a_hint(good_settings):
    good_settings.ECHOMQ = {"URL": f"redis://127.0.0.1:{free_port()}/0"}
    [message] = check_server()
    assert message.id == "echomq.W002" and message.level == checks.WARNING
    assert "does not answer" in message.msg and message.hint


def test_the_checks_are_registered_and_fail_manage_py_check(good_settings):
    call_command("check", "--tag", "echomq")  # no error
    good_settings.ECHOMQ = {"URL": "http://nope"}
    with pytest.raises(SystemCheckError, match=r"echomq\.E003"):
        call_command("check", "--tag", "echomq")


def test_manage_py_check_reports_a_password_masked(good_settings):
    good_settings.ECHOMQ = {"URL": f"redis://user:s3cret@127.0.0.1:{free_port()}/0"}
    [message] = check_server()
    assert "s3cret" not in message.msg and "***" in message.msg


# ---------------------------------------------------------------------------------------
# Deployment: persistence and eviction, on servers started each way
# ---------------------------------------------------------------------------------------


def findings_of(server) -> list[str]:
    connector = Connector.from_url(server.url)
    try:
        return [f.id for f in server_findings(connector)]
    finally:
        connector.close()


def test_a_server_without_aof_or_rdb_loses_jobs_on_restart(valkey_server):
    # the suite's servers run with appendonly no and save ""
    connector = Connector.from_url(valkey_server.url)
    [warning] = server_warnings(connector)
    connector.close()
    assert "persists nothing" in warning


def test_aof_on_and_noeviction_gives_no_warning(aof_server):
    assert findings_of(aof_server) == []


def test_rdb_snapshots_alone_are_a_warning(rdb_server):
    connector = Connector.from_url(rdb_server.url)
    [finding] = server_findings(connector)
    connector.close()
    assert finding.id == "echomq.W013"
    assert (
        "RDB snapshots only (save '3600 1')" in finding.message and "appendonly yes" in finding.hint
    )


@pytest.mark.parametrize("value", ["no", "yes", 1, 0, None, "Outbox", [True]])
def test_enqueue_on_commit_takes_true_or_false_only(good_settings, value):
    good_settings.TASKS["default"]["OPTIONS"] = {"ENQUEUE_ON_COMMIT": value}
    [message] = backend_messages(good_settings)
    assert message.id == "echomq.E006" and "ENQUEUE_ON_COMMIT must be False or True" in message.msg
    with pytest.raises(ImproperlyConfigured, match="ENQUEUE_ON_COMMIT"):
        echo.enqueue("never sent")
    for value in (True, False):
        good_settings.TASKS["default"]["OPTIONS"] = {"ENQUEUE_ON_COMMIT": value}
        assert backend_messages(good_settings) == []


@pytest.mark.parametrize("value", ["extjobs", [5], ["ok", "not a module"], ("a..b",), None, {}])
def test_task_modules_takes_a_list_of_dotted_module_paths_only(good_settings, value):
    """A string was read letter by letter, each letter a module ('No module named b'
    from an unrelated check, and the task never ran)."""
    good_settings.TASKS["default"]["OPTIONS"] = {"TASK_MODULES": value}
    [message] = backend_messages(good_settings)
    assert message.id == "echomq.E006" and "TASK_MODULES must be a list" in message.msg
    for value in (["extjobs", "shop.jobs"], ()):
        good_settings.TASKS["default"]["OPTIONS"] = {"TASK_MODULES": value}
        assert backend_messages(good_settings) == []


def test_an_evicting_memory_policy_is_a_warning(lru_server):
    connector = Connector.from_url(lru_server.url)
    [finding] = server_findings(connector)
    connector.close()
    assert finding.id == "echomq.W011"
    assert "allkeys-lru" in finding.message and "noeviction" in finding.hint


def test_config_refused_means_persistence_cannot_be_verified(make_acl_server):
    acl = make_acl_server("~emq:* +@all -config")
    connector = Connector.from_url(acl.url)
    [finding] = server_findings(connector)
    connector.close()
    assert finding.id == "echomq.W010" and "cannot be read" in finding.message


def test_server_warnings_never_raise_on_an_unreachable_server():
    connector = Connector.from_url(f"redis://127.0.0.1:{free_port()}/0")
    [warning] = server_warnings(connector)
    assert "could not be read" in warning


def test_check_deploy_reports_the_server_findings(settings, lru_server, aof_server):
    settings.ECHOMQ = {"URL": lru_server.url}
    conf.reset()
    assert ids(check_server_deploy()) == ["echomq.W011"]
    settings.ECHOMQ = {"URL": aof_server.url}
    assert check_server_deploy() == []
    found = checks.run_checks(include_deployment_checks=True, tags=["echomq"])
    assert "echomq.W011" not in ids(found)
    conf.reset()


def test_check_deploy_leaves_an_unreachable_server_to_w002(settings):
    settings.ECHOMQ = {"URL": f"redis://127.0.0.1:{free_port()}/0"}
    found = ids(checks.run_checks(include_deployment_checks=True, tags=["echomq"]))
    assert found == ["echomq.W002"]
    conf.reset()


def test_every_cluster_primary_is_checked(valkey_cluster, cluster_client):
    host, port = valkey_cluster.startup_nodes[0]
    connector = Connector.from_url(f"redis+cluster://{host}:{port}/0")
    warnings = server_warnings(connector)
    connector.close()
    assert len(warnings) == 3
    assert all(w.startswith("Node ") and "persists nothing" in w for w in warnings)


def test_a_url_with_a_password_warns_until_error_reports_mask_it(good_settings):
    good_settings.ECHOMQ = {**good_settings.ECHOMQ, "URL": "redis://u:s3cret@127.0.0.1:1/0"}
    good_settings.DEFAULT_EXCEPTION_REPORTER_FILTER = (
        "django.views.debug.SafeExceptionReporterFilter"
    )
    [message] = check_settings()
    assert message.id == "echomq.W003" and "s3cret" not in message.msg + message.hint
    assert "redis://u:***@127.0.0.1:1/0" in message.msg
    good_settings.DEFAULT_EXCEPTION_REPORTER_FILTER = (
        "echomq_django.debug.SafeExceptionReporterFilter"
    )
    assert check_settings() == []
