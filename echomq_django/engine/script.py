"""Lua scripts, loaded once from ``scripts/*.lua`` with their SHA1 computed at load.

One file per transition, named after it. A script may pull shared helpers with a
line ``-- @include "name"``, which inlines ``scripts/includes/name.lua`` (the same
habit as BullMQ's ``--- @include``): Redis has no ``require``, and copy-pasting
helpers into every script is how two copies drift apart.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

SCRIPTS_DIR = Path(__file__).with_name("scripts")
_INCLUDE = re.compile(r'^--\s*@include\s+"([a-z_]+)"\s*$', re.MULTILINE)


@dataclass(frozen=True)
class Script:
    """A Lua body and its SHA1: what EVALSHA sends instead of the body."""

    name: str
    body: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.body.encode()).hexdigest())

    @classmethod
    def from_source(cls, name: str, source: str) -> Script:
        return cls(name, _expand_includes(source, SCRIPTS_DIR / "includes", seen=()))


@dataclass(frozen=True)
class Call:
    """One script invocation, for pipelining many in one round trip."""

    script: Script
    keys: Sequence[str]
    args: Sequence[Any]


def _expand_includes(source: str, folder: Path, seen: tuple[str, ...]) -> str:
    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:
            raise ValueError(f"circular @include of {name!r}")
        text = (folder / f"{name}.lua").read_text()
        return _expand_includes(text, folder, (*seen, name)).rstrip("\n")

    return _INCLUDE.sub(include, source)


@cache
def load(name: str) -> Script:
    """The script ``scripts/<name>.lua``, read and hashed once per process."""
    path = SCRIPTS_DIR / f"{name}.lua"
    return Script.from_source(name, path.read_text())


def all_scripts() -> list[Script]:
    return [load(p.stem) for p in sorted(SCRIPTS_DIR.glob("*.lua"))]
