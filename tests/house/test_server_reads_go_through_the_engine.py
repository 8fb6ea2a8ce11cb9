"""The house rule "code above the engine reads the server only through the engine".

A raw redis-py call in the Django layer bypasses the engine's error map: a refused or
lost server there becomes a 500 instead of the typed error every page and command
answers (the admin's 503 page, a CommandError). So no module outside
``echomq_django/engine`` (and the dev server, a server of its own) may reach a
connector's ``client`` or import redis-py: the engine offers what they need
(``Jobs``, ``engine.nodes``, ``engine.registry``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import echomq_django

PACKAGE = Path(echomq_django.__file__).parent
OWN_CLIENTS = ("engine", "devserver")  # the layers that hold clients of their own


def layer_modules() -> list[Path]:
    return sorted(
        path
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] not in OWN_CLIENTS
    )


def raw_server_access(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, name)):
        where = f"{name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and node.attr == "client":
            found.append(f"{where}: .client")
        elif isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "redis" for a in node.names
        ):
            found.append(f"{where}: import redis")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "redis":
            found.append(f"{where}: from redis import")
    return found


def test_no_code_above_the_engine_reads_the_server_through_a_raw_client():
    modules = layer_modules()
    assert len(modules) > 40  # the walk found the Django layer
    hits = [
        hit
        for path in modules
        for hit in raw_server_access(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    ]
    assert hits == []


def test_the_check_sees_a_raw_client_call():
    planted = "import redis\n\ndef f(connector):\n    return connector.client.time()\n"
    assert raw_server_access(planted, "planted.py") == [
        "planted.py:1: import redis",
        "planted.py:4: .client",
    ]
