"""Lua scripts, loaded once from ``scripts/*.lua`` with their SHA1 computed at load.

One file per transition, named after it. A script may pull shared helpers with a
line ``-- @include "name"``, which inlines ``scripts/includes/name.lua`` (the same
habit as BullMQ's ``--- @include``): Redis has no ``require``, and copy-pasting
helpers into every script is how two copies drift apart. Likewise a script names
a Python bound as ``${NAME}`` (``engine/bounds.py``), filled in at load.

A script's header declares its KEYS once, and Python builds every call from it
(``Signature``): ``KEYS[<n>] <name> <TYPE>`` for the fixed keys, in order, and
``KEYS[<n> + i] <name> <TYPE>`` for a list after them (one key per item), where
``<name>`` is a ``QueueKeys`` property (``pending``) or a one-argument method
(``job``, ``claim``, ``schedule``, ``state_set``, ``idempotency``) and ``<TYPE>``
one of ZSET, HASH, STRING, SET, STREAM; free text may follow in parentheses. A name the
keyspace does not know fails at load, so a header cannot drift from the calls.

The header's places are also checked at every call (``_places_guard``): a job's place
is a sorted set, and a key of another type there would fail a script at its move,
after its first writes, leaving the job in no place (Redis rolls nothing back).
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from . import bounds
from .keyspace import QueueKeys

SCRIPTS_DIR = Path(__file__).with_name("scripts")
_INCLUDE = re.compile(r'^--\s*@include\s+"([a-z_]+)"\s*$', re.MULTILINE)
_BOUND = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")
_KEY = re.compile(
    r"KEYS\[(?P<at>\d+)(?P<list>(?:\s*\+\s*[a-z]+)*)\]\s+(?P<name>[a-z_]+)"
    r"\s+(?:ZSET|HASH|STRING|SET|STREAM)\b"
)
_ARG = re.compile(r"ARGV\[(?P<at>[^\]]+)\]\s*(?P<text>.*?)(?=\s*ARGV\[|$)")
# The sorted sets a job or a schedule lives in. The wake-up list is a ZSET too, but
# written best-effort (a pcall: common.lua), so a planted key there costs only wake-ups.
PLACES = frozenset(
    {"pending", "scheduled", "active", "completed", "dead", "state_set", "schedules"}
)


@dataclass(frozen=True)
class Signature:
    """What a script's header declares: its KEYS by name, and its ARGV.

    ``keys``: the fixed KEYS in order; ``key_list``: the names of the lists of keys
    that follow them (``job`` in ``KEYS[3 + i] job HASH``), in order. ``argv``: the
    header's ARGV entries as (index, text), the index as written (``1``, ``7..``).
    """

    keys: tuple[str, ...] = ()
    key_list: tuple[str, ...] = ()
    argv: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, name: str, source: str) -> Signature:
        """The signature in the leading comment block of ``source``; ValueError if a
        KEYS entry does not follow the grammar, is out of order, or names no key."""
        header = []
        for line in source.splitlines():
            if not line.startswith(("--", "#!")):
                break
            header.append(line.removeprefix("--").strip())
        # Declarations are the lines that begin with KEYS[ or ARGV[; prose may cite them.
        text = "\n".join(line for line in header if line.startswith("KEYS["))
        entries = list(_KEY.finditer(text))
        if len(entries) != text.count("KEYS["):
            raise ValueError(f"script {name}: a KEYS entry is not `KEYS[<n>] <name> <TYPE>`")
        keys: list[str] = []
        key_list: list[str] = []
        for entry in entries:
            at, key = int(entry["at"]), entry["name"]
            _check_key(name, key)
            if not entry["list"] and not key_list and at == len(keys) + 1:
                keys.append(key)
            elif entry["list"] and at == len(keys):
                key_list.append(key)
            else:
                raise ValueError(f"script {name}: KEYS[{at}{entry['list']}] {key} is out of order")
        # The ARGV paragraph: from the first line that begins with ARGV[ to a blank line.
        first = next((n for n, line in enumerate(header) if line.startswith("ARGV[")), None)
        lines = [] if first is None else header[first:]
        paragraph = " ".join(lines[: lines.index("")] if "" in lines else lines)
        argv = tuple(
            (m["at"], " ".join(m["text"].split()).rstrip(",")) for m in _ARG.finditer(paragraph)
        )
        return cls(tuple(keys), tuple(key_list), argv)


def _check_key(script_name: str, key: str) -> None:
    """A header's key must be a ``QueueKeys`` property or a method of one argument (the
    call gives it by the key's name), so a typo fails at load, never at a call."""
    try:
        attr = inspect.getattr_static(QueueKeys, key)
    except AttributeError:
        attr = None
    if isinstance(attr, (property, cached_property)):
        return
    if inspect.isfunction(attr) and len(inspect.signature(attr).parameters) == 2:
        return
    raise ValueError(f"script {script_name}: KEYS name {key!r} is no key of QueueKeys")


@dataclass(frozen=True)
class Script:
    """A Lua body and its SHA1: what EVALSHA sends instead of the body."""

    name: str
    body: str
    signature: Signature = Signature()
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.body.encode()).hexdigest())

    @classmethod
    def from_source(cls, name: str, source: str) -> Script:
        signature = Signature.parse(name, source)
        guarded = _places_guard(source, signature)
        body = _expand_includes(guarded, SCRIPTS_DIR / "includes", (), set())
        return cls(name, _BOUND.sub(_bound, body), signature)

    def keys_for(self, queue: QueueKeys, **named: Any) -> list[str]:
        """The KEYS of a call on ``queue``, in the header's order. A key built by a
        method takes its argument by the header's name (``job=job_id``), a list of
        keys a sequence of them (``job=[id, ...]``); a list not given is empty."""
        unknown = named.keys() - self._key_names
        if unknown:
            raise TypeError(f"script {self.name} has no KEYS named {', '.join(sorted(unknown))}")
        keys = [
            getattr(queue, key)(named[key]) if built else getattr(queue, key)
            for key, built in self._fixed_keys
        ]
        for key in self.signature.key_list:
            keys += map(getattr(queue, key), named.get(key, ()))
        return keys

    @cached_property
    def _key_names(self) -> frozenset[str]:
        return frozenset((*self.signature.keys, *self.signature.key_list))

    @cached_property
    def _fixed_keys(self) -> tuple[tuple[str, bool], ...]:
        """The fixed KEYS by name, each with whether a method builds it (from a named
        argument) rather than a property: told apart once, not at every call."""
        return tuple(
            (
                key,
                not isinstance(inspect.getattr_static(QueueKeys, key), cached_property | property),
            )
            for key in self.signature.keys
        )


@dataclass(frozen=True)
class Call:
    """One script invocation, for pipelining many in one round trip."""

    script: Script
    keys: Sequence[str]
    args: Sequence[Any]


def _places_guard(source: str, signature: Signature) -> str:
    """``source`` with a check of its places put before its first line of code.

    Every place the header names must hold a sorted set, or nothing yet; otherwise the
    script answers EMQCORRUPT naming the key, before its first write. The check is
    written here, from the header, so no script can forget one of its places (a TYPE
    per place: well under a microsecond each).
    """
    places = [str(at) for at, key in enumerate(signature.keys, 1) if key in PLACES]
    if not places:
        return source
    guard = (
        f"for _, at in ipairs({{{', '.join(places)}}}) do\n"
        "  local kind = redis.call('TYPE', KEYS[at])['ok']\n"
        "  if kind ~= 'zset' and kind ~= 'none' then\n"
        "    return redis.error_reply('EMQCORRUPT ' .. KEYS[at] .. ' holds a ' .. kind\n"
        "      .. ', not a sorted set: nothing was changed; repair or delete the key')\n"
        "  end\n"
        "end\n"
    )
    lines = source.splitlines(keepends=True)
    first_code = next(
        (n for n, line in enumerate(lines) if not line.startswith(("--", "#!"))), len(lines)
    )
    return "".join([*lines[:first_code], guard, *lines[first_code:]])


def _expand_includes(source: str, folder: Path, stack: tuple[str, ...], done: set[str]) -> str:
    """Inline each ``@include`` once, where it is first asked for, its own includes first.

    An include names what it needs itself (moves.lua includes "common"), so a script
    lists only what it uses and the helpers arrive in dependency order, each once.
    """

    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in stack:
            raise ValueError(f"circular @include of {name!r}")
        if name in done:
            return ""
        text = (folder / f"{name}.lua").read_text()
        expanded = _expand_includes(text, folder, (*stack, name), done).rstrip("\n")
        done.add(name)
        return expanded

    return _INCLUDE.sub(include, source)


def _bound(match: re.Match[str]) -> str:
    """``${NAME}``: the integer ``bounds.NAME``, Python's value in the script."""
    value = getattr(bounds, match.group(1), None)
    if not isinstance(value, int):
        raise ValueError(f"no integer bound named {match.group(1)!r} in engine/bounds.py")
    return str(value)


@cache
def load(name: str) -> Script:
    """The script ``scripts/<name>.lua``, read and hashed once per process."""
    path = SCRIPTS_DIR / f"{name}.lua"
    return Script.from_source(name, path.read_text())


def all_scripts() -> list[Script]:
    return [load(p.stem) for p in sorted(SCRIPTS_DIR.glob("*.lua"))]
