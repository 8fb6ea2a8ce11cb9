"""The pytest plugin, used as a user uses it: userproject/'s own suite, run by pytest in a
subprocess (``-p echomq_django.testing.plugin``, as the ``pytest11`` entry point loads it)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import redis

from tests.support.postgresql import admin_connection_or_skip
from tests.testing.conftest import DEV_DB, TEST_DB

ROOT = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).resolve().parent / "userproject"
USER_TESTS = 14  # the tests in userproject/shop_tests


def run_user_suite(
    dev_url: str, test_url: str | None, *args: str, **extra_env: str
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHOMQ_", "PYTEST_"))}
    env.update(extra_env)
    env.update(
        PYTHONPATH=f"{ROOT}{os.pathsep}{PROJECT}",
        DJANGO_SETTINGS_MODULE="settings",
        # Only the plugins named below, whatever else this environment has installed
        # (the entry point too, were echomq-django installed: it would load it twice).
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        ECHOMQ_URL=dev_url,
    )
    if test_url is not None:
        env["ECHOMQ_TEST_URL"] = test_url
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_django.plugin",
         "-p", "echomq_django.testing.plugin",
         "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(PROJECT),
         "--confcutdir", str(PROJECT),  # the user's project: none of this repo's conftests
         "-q", "shop_tests", *args],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


def test_the_users_suite_passes_on_an_embedded_server_of_its_own(dev_server):
    url, _ = dev_server
    proc = run_user_suite(f"{url}/{DEV_DB}", None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{USER_TESTS} passed" in proc.stdout


def test_the_users_suite_passes_on_ECHOMQ_TEST_URL_and_leaves_it_flushed(dev_server):
    url, _ = dev_server
    proc = run_user_suite(f"{url}/{DEV_DB}", f"{url}/{TEST_DB}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{USER_TESTS} passed" in proc.stdout
    assert redis.Redis.from_url(f"{url}/{TEST_DB}").dbsize() == 0


def test_the_users_suite_passes_on_postgresql(dev_server):
    """Where a failed statement aborts the test's transaction (drain() runs jobs in it)."""
    admin_connection_or_skip().close()
    url, _ = dev_server
    name = f"echomq_shop_{os.getpid()}_{secrets.token_hex(3)}"
    proc = run_user_suite(f"{url}/{DEV_DB}", None, SHOP_POSTGRESQL_NAME=name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{USER_TESTS} passed" in proc.stdout


def test_parallel_workers_get_a_database_each(dev_server):
    """pytest-xdist's worker gw2 uses ECHOMQ_TEST_URL's db + 2: that one is flushed, not the URL's."""
    url, _ = dev_server
    base, own = (
        redis.Redis.from_url(f"{url}/{TEST_DB - 2}"),
        redis.Redis.from_url(f"{url}/{TEST_DB}"),
    )
    base.set("someone-elses", "1")
    own.set("left-over", "1")
    proc = run_user_suite(
        f"{url}/{DEV_DB}", f"{url}/{TEST_DB - 2}", "-k", "starts_empty", PYTEST_XDIST_WORKER="gw2"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert base.get("someone-elses") == b"1"
    assert own.dbsize() == 0
    base.flushdb()


@pytest.mark.parametrize("shared", [False, True], ids=["embedded", "ECHOMQ_TEST_URL"])
def test_the_users_suite_passes_under_pytest_xdist(dev_server, shared):
    """``pytest -n 2``: two processes, each with a server (or a database) of its own."""
    url, _ = dev_server
    test_url = f"{url}/{TEST_DB}" if shared else None
    proc = run_user_suite(f"{url}/{DEV_DB}", test_url, "-p", "xdist.plugin", "-n", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{USER_TESTS} passed" in proc.stdout
    for db in (TEST_DB, TEST_DB + 1):  # gw0's and gw1's, flushed after their last test
        assert redis.Redis.from_url(f"{url}/{db}").dbsize() == 0


def test_ECHOMQ_TEST_URL_equal_to_the_dev_url_is_refused(dev_server):
    url, _ = dev_server
    proc = run_user_suite(f"{url}/{DEV_DB}", f"{url}/{DEV_DB}", "-k", "starts_empty")
    assert proc.returncode != 0
    assert "reaches the database of settings.ECHOMQ['URL']" in proc.stdout + proc.stderr


def test_the_plugin_is_installed_with_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"echomq": "echomq_django.testing.plugin"}
