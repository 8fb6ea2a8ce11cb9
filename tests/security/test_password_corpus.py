"""No password shows anywhere, whatever characters it holds.

A corpus of awkward passwords (``#``, ``/``, ``?``, ``@``, ``:``, ``%``, spaces,
non-ASCII), each written into the URL the ways people write it: percent-quoted
(right), raw in the userinfo, raw in ``?password=``, and in the other places
of the query redis-py takes a secret from (``?pass%77ord=``, ``?ssl_password=``,
any name it does not know) or a fragment cuts one into. Every place a URL or a
connection error surfaces is searched for any piece of the password: the system
checks (with --deploy), the CLI's errors and output, the admin's pages, the
logs of ``runreaper`` and ``runworker``. URL parsers split an unquoted password
in the wrong place, and their errors print the pieces ("Port could not be cast
to integer value as 'Kx7v'"): a URL like that is refused before it is parsed.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import quote

import pytest
from django.core import checks
from django.core.management.base import CommandError

from echomq_django import conf
from echomq_django.devserver import EmbeddedServer
from echomq_django.engine.connector import mask_url
from tests.cli.conftest import echomq_cmd, manage_py

PASSWORDS = [
    "Kx7v#Qz9w", "Kx7v/Qz9w", "Kx7v?Qz9w", "Kx7v@Qz9w", "Kx7v:Qz9w", "Kx7v%Qz9w",
    "Kx7v%40Qz9w", "Kx7v Qz9w", "Kx7v&Qz9w=", "Kx7vü€Qz9w", "Kx7v@h:1/Qz9w#?",
]  # fmt: skip


def pieces(password: str) -> list[str]:
    """What must never show: each run of letters and digits (a parser may split anywhere)."""
    return [p for p in re.split(r"[^A-Za-z0-9]+", password) if len(p) >= 3]


def forms(password: str, port: int) -> dict[str, str]:
    return {
        "quoted": f"redis://echomq:{quote(password, safe='')}@127.0.0.1:{port}/0",
        "raw userinfo": f"redis://echomq:{password}@127.0.0.1:{port}/0",
        "raw query": f"redis://127.0.0.1:{port}/0?password={password}",
    }


def query_forms(password: str, port: int) -> dict[str, str]:
    """The places in the query redis-py also takes a secret from, and a fragment."""
    quoted = quote(password, safe="")
    return {
        "decoded name": f"redis://127.0.0.1:{port}/0?pass%77ord={quoted}",
        "mixed case": f"redis://127.0.0.1:{port}/0?db=0&PassWord={password}",
        "ssl_password": f"rediss://127.0.0.1:{port}/0?ssl_password={quoted}&db=0",
        "fragment": f"redis://127.0.0.1:{port}/0?socket_timeout=5#{password}",
    }


def assert_hidden(password: str, text: str, where: str) -> None:
    for piece in pieces(password):
        assert piece not in text, f"{where}: {piece!r} of {password!r} shows in {text!r}"


@pytest.fixture(scope="module")
def locked(valkey_server):
    """A server that wants another password: every form below is refused or invalid."""
    with EmbeddedServer(binary=valkey_server.binary, password="the-right-one") as own:
        yield own


@pytest.mark.parametrize("password", PASSWORDS)
def test_mask_url_hides_every_piece(password):
    for form, url in {**forms(password, 6379), **query_forms(password, 6379)}.items():
        masked = mask_url(url)
        assert_hidden(password, masked, form)
        assert "***" in masked, masked


@pytest.mark.django_db
@pytest.mark.parametrize("password", PASSWORDS)
def test_checks_cli_admin_and_logs_never_show_it(password, settings, locked, admin_client, caplog):
    caplog.set_level(logging.DEBUG)
    for form, url in forms(password, locked.port).items():
        settings.ECHOMQ = {"URL": url, "QUEUES": ["default"]}
        conf.reset()
        found = checks.run_checks(include_deployment_checks=True, tags=["echomq"])
        assert found, f"{form}: a refused or invalid URL must be reported"
        assert_hidden(password, " ".join(f"{m.msg} {m.hint}" for m in found), f"checks, {form}")
        for args in (("ping",), ("stats", "--json"), ("workers",)):
            with pytest.raises(CommandError) as info:
                echomq_cmd(*args)
            assert_hidden(password, str(info.value), f"echomq {args[0]}, {form}")
        for page in ("/admin/echomq/", "/admin/echomq/queues/default/dead/"):
            response = admin_client.get(page)
            assert response.status_code == 503, (form, page)
            assert_hidden(password, response.content.decode(), f"admin {page}, {form}")
        assert_hidden(password, caplog.text, f"logs, {form}")
    conf.reset()


@pytest.mark.parametrize("password", ["Kx7v@h:1/Qz9w#?", "Kx7v%Qz9w"])
def test_processes_started_with_it_never_print_it(password, valkey_server):
    """Quoted, the password is right: the processes run, and print the URL masked.
    Raw, a URL is refused (or, for a '%' that starts no escape, works): never printed."""
    with EmbeddedServer(binary=valkey_server.binary, password=password) as own:
        every = {
            **forms(password, own.port),
            "decoded name": query_forms(password, own.port)["decoded name"],
        }
        for form, url in every.items():
            url = url.replace("echomq:", "default:")
            for args in (["runreaper", "--once"], ["runworker", "--burst"], ["echomq", "ping"]):
                done = manage_py(*args, url=url)
                assert_hidden(password, done.stdout + done.stderr, f"{args[0]}, {form}")
                assert "Traceback" not in done.stderr, done.stderr
                if form in ("quoted", "decoded name"):  # both are right: redis-py decodes
                    assert done.returncode == 0, done.stderr
