"""Outbox fixtures: the app in outbox mode on the suite's server, and real databases.

``echomq``       settings aimed at the test server (flushed), ENQUEUE_ON_COMMIT "outbox";
                 the test's own database is pytest-django's (SQLite in memory)
``database``     a database of its own for child processes (module scope): a SQLite
                 file, and a PostgreSQL database created on 127.0.0.1:5432 for these
                 tests and dropped after them (skipped, saying why, when no server
                 answers). Migrated by ``manage.py migrate`` in a child process.
``child``        start ``python -m tests.outbox.proc ...`` / ``python -m django ...``
                 on ``database`` and the test server; every child is killed at the end
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from echomq_django import conf
from tests.django import settings as django_test_settings
from tests.support.postgresql import admin_connection_or_skip

ROOT = Path(__file__).resolve().parents[2]

OUTBOX_TASKS = {
    "default": {
        **django_test_settings.TASKS["default"],
        "OPTIONS": {
            **django_test_settings.TASKS["default"]["OPTIONS"],
            "ENQUEUE_ON_COMMIT": "outbox",
            "TASK_MODULES": ["tests.django.tasks", "tests.outbox.tasks"],
        },
    }
}


@pytest.fixture
def echomq(settings, url, redis_client):
    settings.ECHOMQ = {"URL": url}
    settings.TASKS = OUTBOX_TASKS
    conf.reset()
    yield redis_client
    conf.reset()


@pytest.fixture
def jobs(echomq):
    return conf.get_jobs()


@dataclass
class Database:
    """A real database the child processes share; read here with the plain driver."""

    kind: str  # "sqlite" or "postgresql"
    url: str  # for ECHOMQ_TEST_DB (django-environ's URL form)
    dsn: str  # the file path, or a libpq conninfo

    def query(self, sql: str) -> list[tuple]:
        if self.kind == "sqlite":
            with sqlite3.connect(self.dsn, timeout=30) as db:
                return db.execute(sql).fetchall()
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as db:
            cursor = db.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def outbox(self) -> int:
        return self.query("SELECT COUNT(*) FROM echomq_outbox")[0][0]

    def clear(self) -> None:
        self.query("DELETE FROM echomq_outbox")


def _postgresql(request) -> Iterator[Database]:
    admin = admin_connection_or_skip()
    name = f"echomq_outbox_test_{os.getpid()}_{secrets.token_hex(3)}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield Database(
            "postgresql",
            f"postgresql://postgres@127.0.0.1:5432/{name}",
            f"host=127.0.0.1 port=5432 user=postgres dbname={name}",
        )
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(request, tmp_path_factory) -> Iterator[Database]:
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("outbox-db") / "outbox.sqlite3"
        made: Iterator[Database] = iter([Database("sqlite", f"sqlite:///{path}", str(path))])
    else:
        made = _postgresql(request)
    for db in made:
        env = {**os.environ, **_child_env(db, "redis://127.0.0.1:1/0")}
        subprocess.run(
            [sys.executable, "-m", "django", "migrate", "-v", "0"],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        yield db


def _child_env(db: Database, url: str) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "tests.outbox.settings",
        "ECHOMQ_TEST_DB": db.url,
        "ECHOMQ_TEST_URL": url,
        "PYTHONPATH": str(ROOT),
    }


class Children:
    """Child processes on one database and server, logs under the test's tmp_path."""

    def __init__(self, db: Database, url: str, tmp_path: Path) -> None:
        self.db, self.url, self.tmp_path = db, url, tmp_path
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def start(self, *argv: str) -> subprocess.Popen:
        log = self.tmp_path / f"child-{len(self.procs)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", *argv],
                cwd=ROOT,
                env={**os.environ, **_child_env(self.db, self.url)},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.procs.append((proc, log))
        return proc

    def run(self, *argv: str, timeout: float = 60) -> str:
        """Run to the end; its output. A non-zero exit fails the test with the output."""
        proc = self.start(*argv)
        code = proc.wait(timeout)
        output = self.procs[-1][1].read_text(errors="replace")
        assert code == 0, f"{argv} exited {code}:\n{output}"
        return output

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.args[2:]} (exit {p.poll()}):\n{log.read_text(errors='replace')[-3000:]}"
            for p, log in self.procs
            if log.exists()
        )

    def kill_all(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@pytest.fixture
def child(database, url, redis_client, tmp_path) -> Iterator[Children]:
    database.clear()
    children = Children(database, url, tmp_path)
    yield children
    children.kill_all()
