"""The machine's PostgreSQL server (127.0.0.1:5432, user postgres), or a skip saying why.

Tests that need PostgreSQL's own behaviour (its row locks, its aborted transactions)
use it; where no server answers they are skipped with the reason, not failed.
"""

from __future__ import annotations

import pytest

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


def admin_connection_or_skip():  # -> psycopg.Connection (psycopg is imported only here)
    """An autocommit connection to the server's ``postgres`` database."""
    try:
        import psycopg
    except ImportError as exc:
        pytest.skip(f"psycopg is not installed ({exc}): pip install -r requirements-dev.txt")
    try:
        return psycopg.connect(PG_ADMIN, autocommit=True)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL server answers on 127.0.0.1:5432 as user postgres: {exc}")
