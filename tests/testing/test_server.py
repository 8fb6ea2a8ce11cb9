"""The session's server, when it cannot be had: the error says what to do in a test run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from echomq_django.devserver import binary
from echomq_django.testing import server
from echomq_django.testing.server import TestServerError


def test_no_server_binary_says_how_to_give_the_tests_a_server(monkeypatch, tmp_path):
    """Not "point ECHOMQ_URL at a running server" (the dev server's advice): the tests
    never use that one, and following it changed nothing."""
    monkeypatch.delenv(server.TEST_URL_ENV, raising=False)
    monkeypatch.setattr(binary, "wheel_binary", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))  # no valkey-server, no redis-server
    with pytest.raises(TestServerError, match="no binary") as raised:
        server.start("redis://127.0.0.1:1/0")
    assert "ECHOMQ_TEST_URL" in str(raised.value)
    assert "ECHOMQ_URL at" not in str(raised.value)


def test_a_worker_past_the_servers_databases_is_told_so(valkey_server, monkeypatch):
    """``-n 4`` on db 14 of a 16-db server: gw2 would use db 16, and every test of that
    worker failed with the server's "DB index is out of range" from the scripts."""
    url = valkey_server.url.rsplit("/", 1)[0]
    monkeypatch.setenv(server.TEST_URL_ENV, f"{url}/14")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    with pytest.raises(TestServerError, match="the server has no database 16 "):
        server.start(None)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert server.start(None).url == f"{url}/15"


def test_loading_the_plugin_imports_nothing_of_echomq():
    """pytest loads it in every run where the package is installed, EchoMQ's or not: the
    engine and redis-py (about 150 ms) wait for a test that asks for a fixture."""
    code = (
        "import sys, echomq_django.testing.plugin; "
        "print(*sorted(m for m in sys.modules if m.startswith(('redis', 'echomq_django.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["echomq_django.testing", "echomq_django.testing.plugin"]
