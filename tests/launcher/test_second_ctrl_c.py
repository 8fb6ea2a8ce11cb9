"""scripts/run: the first Ctrl-C says what stopping waits for; a second one stops at once."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from echomq_django.devserver import free_port
from tests.test_run_launcher import Launcher, _processes_mentioning, launcher_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


def test_a_second_ctrl_c_stops_everything_at_once(tmp_path):
    env = launcher_env(
        tmp_path,
        ECHOMQ_SERVER_PORT=str(free_port()),
        ECHOMQ_HTTP_ADDR=f"127.0.0.1:{free_port()}",
        ECHOMQ_ADMIN_PASSWORD="run-test-password",
    )
    run = Launcher(env)
    try:
        run.wait_ready()
        os.killpg(run.proc.pid, signal.SIGINT)
        deadline = time.monotonic() + 30
        while not any("Ctrl-C again stops everything at once" in line for line in run.lines):
            assert time.monotonic() < deadline, run.output()
            time.sleep(0.05)
        os.kill(run.proc.pid, signal.SIGINT)  # the launcher alone: as a second Ctrl-C reaches it
        assert run.proc.wait(timeout=30) == 0, run.output()
    finally:
        run.terminate()
    assert "run | Ctrl-C again: stopping everything at once" in run.output()
    assert _processes_mentioning(str(tmp_path)) == [], run.output()
