"""Static proofs over the Lua sources (no server needed).

Invariant 5, declared keys: every key a script reads or writes is one of its KEYS,
or is built from ``base`` (the queue prefix matched out of KEYS[1], so it carries
the queue's hash tag). The check follows each key expression back through local
assignments and helper-function parameters to its origin; a key name read out of
a row, an ARGV or a global fails it. (The runtime proof on a real cluster lives
with the cluster tests.)

Validate before writing: Redis does not roll back a script's writes when the
script fails halfway, so every refusal (``error_reply``) must come before the
script's first write. A batch script (one call, many jobs: enqueue, complete)
refuses job by job inside its loop: there each refusal must come before the
first write of that job's turn of the loop.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from echomq_django.engine import script
from echomq_django.engine.jobs import Jobs
from echomq_django.engine.keyspace import QueueKeys, new_job_id
from echomq_django.engine.new_job import NewJob

SCRIPTS = script.all_scripts()
IDS = [s.name for s in SCRIPTS]

_CALL = re.compile(r"redis\.p?call\(\s*'([A-Z]+)'\s*([,)])")
_NO_KEY = {"TIME"}
_READS = {"GET", "HGET", "HMGET", "HGETALL", "EXISTS", "ZRANGE", "ZRANGEBYSCORE", "ZCOUNT",
          "ZCARD", "ZSCORE", "TIME", "TYPE"}  # fmt: skip
_IDENT = r"[A-Za-z_]\w*"
_ASSIGN = re.compile(rf"^\s*(?:local\s+)?({_IDENT}(?:\s*,\s*{_IDENT})*)\s*=(?!=)\s*(.+)$", re.M)
_FUNCTION = re.compile(rf"function\s+({_IDENT})\s*\(([^)]*)\)")


def split_args(text: str, open_paren: int) -> tuple[list[str], int]:
    """The top-level comma-separated arguments of the call whose '(' is at ``open_paren``."""
    args, depth, quote, current = [], 0, "", []
    for i in range(open_paren + 1, len(text)):
        ch = text[i]
        if quote:
            quote = "" if ch == quote and text[i - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
        elif ch == ")":
            args.append("".join(current).strip())
            return [a for a in args if a], i
        elif ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    raise ValueError(f"unbalanced call at {text[open_paren : open_paren + 60]!r}")


def split_values(text: str) -> list[str]:
    return split_args(f"({text})", 0)[0]


def bindings(body: str, name: str) -> tuple[list[str], bool]:
    """Every expression ``name`` can hold, and whether ``name`` is bound at all.

    Scope-blind on purpose (conservative): all assignments to the name anywhere,
    and for a function parameter the matching argument of every call site.
    """
    exprs, bound = [], False
    for m in _ASSIGN.finditer(body):
        names = [n.strip() for n in m.group(1).split(",")]
        if name in names:
            bound = True
            values = split_values(m.group(2))
            exprs.append(values[names.index(name)] if names.index(name) < len(values) else "nil")
    for m in _FUNCTION.finditer(body):
        params = [p.strip() for p in m.group(2).split(",")]
        if name not in params:
            continue
        bound = True
        for call in re.finditer(rf"(?<![\w.]){m.group(1)}\(", body):
            if body[call.start() - 9 : call.start()].endswith("function "):
                continue
            args, _ = split_args(body, call.end() - 1)
            exprs.append(args[params.index(name)])
    return exprs, bound


def is_keys_element(expr: str) -> bool:
    """``KEYS[...]`` as a whole (the index may be computed: a batch's job i is KEYS[3 + i])."""
    if not expr.startswith("KEYS["):
        return False
    depth = 0
    for i, ch in enumerate(expr[4:], start=4):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth == 0:
            return i == len(expr) - 1
    return False


def key_origin_ok(body: str, expr: str, seen: frozenset[str] = frozenset()) -> bool:
    """True when ``expr`` can only name a declared key or a key built from ``base``."""
    expr = expr.strip()
    if is_keys_element(expr) or re.match(r"(row_key\(|base\s*\.\.)", expr):
        return True
    if not re.fullmatch(_IDENT, expr):
        return False
    if expr in seen:
        return True
    exprs, bound = bindings(body, expr)
    return bound and all(key_origin_ok(body, e, seen | {expr}) for e in exprs)


def key_expressions(body: str) -> list[tuple[str, str]]:
    found = []
    for m in _CALL.finditer(body):
        if m.group(1) in _NO_KEY:
            continue
        args, _ = split_args(body, body.index("(", m.start()))
        found.append((m.group(1), args[1]))
    return found


def test_base_and_row_keys_carry_the_queue_prefix():
    common = (script.SCRIPTS_DIR / "includes" / "common.lua").read_text()
    assert "local base = string.match(KEYS[1], '^(.*:)[a-z]+$')" in common
    assert re.search(r"function row_key\(id\)\s+return base \.\. 'job:' \.\. id\s+end", common)


@pytest.mark.parametrize("s", SCRIPTS, ids=IDS)
def test_every_key_a_script_touches_is_declared_or_built_from_base(s):
    calls = key_expressions(s.body)
    assert calls, "a script that touches no key?"
    bad = [(cmd, expr) for cmd, expr in calls if not key_origin_ok(s.body, expr)]
    assert bad == [], f"{s.name}: keys of undeclared origin: {bad}"


@pytest.mark.parametrize("s", SCRIPTS, ids=IDS)
def test_keys_used_are_the_ones_the_header_declares(s):
    declared = {int(n) for n in re.findall(r"KEYS\[(\d+)\]\s+\S", s.body.split("-- @include")[0])}
    used = {int(n) for n in re.findall(r"KEYS\[(\d+)\]", s.body)}
    assert declared and used <= declared, (
        f"{s.name} uses KEYS {sorted(used - declared)} undocumented"
    )


def test_the_checker_refuses_keys_of_undeclared_origin():
    """The check can fail: a key read from a row, from ARGV or a global is refused."""
    body = (
        "local base = string.match(KEYS[1], '^(.*:)[a-z]+$')\n"
        "local function drop(k) redis.call('DEL', k) end\n"
        "local other = redis.call('HGET', KEYS[2], 'ref')\n"
        "drop(KEYS[1])\ndrop(other)\n"
        "redis.call('SET', ARGV[1], 1)\nredis.call('GET', somewhere)\n"
        "redis.call('ZADD', base .. 'x', 1, 'a')\n"
    )
    verdicts = {expr: key_origin_ok(body, expr) for _, expr in key_expressions(body)}
    assert verdicts == {"k": False, "KEYS[2]": True, "ARGV[1]": False, "somewhere": False,
                        "base .. 'x'": True}  # fmt: skip


def _writing_functions(body: str) -> set[str]:
    """Helper functions whose bodies write (directly or through another writer)."""
    spans = {}
    for m in _FUNCTION.finditer(body):
        end = re.compile(r"^end$", re.M).search(body, m.end())
        spans[m.group(1)] = body[m.end() : end.start() if end else len(body)]
    writers: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, text in spans.items():
            direct = any(c not in _READS for c, _ in _CALL.findall(text))
            nested = any(re.search(rf"(?<![\w.]){w}\(", text) for w in writers)
            if name not in writers and (direct or nested):
                writers.add(name)
                changed = True
    return writers


def late_refusals(own: str, writers: set[str]) -> list[str]:
    """The refusals in ``own`` (a transition's text) that come after a write they follow."""
    loop = re.search(r"^for .* do$", own, re.M)  # a batch script's loop over its jobs

    def first_write(start: int) -> int:
        found = [m.start() for m in _CALL.finditer(own, start) if m.group(1) not in _READS]
        for w in writers:
            found += [m.start() for m in re.compile(rf"(?<![\w.]){w}\(").finditer(own, start)]
        return min(found, default=len(own))

    late = []
    for m in re.finditer(r"error_reply|\bfence\(", own):
        in_loop = loop is not None and m.start() > loop.start()
        if m.start() > first_write(loop.end() if in_loop else 0):
            late.append(own[m.start() : own.index("\n", m.start())])
    return late


@pytest.mark.parametrize("s", SCRIPTS, ids=IDS)
def test_every_refusal_comes_before_the_first_write(s):
    own = script.SCRIPTS_DIR.joinpath(f"{s.name}.lua").read_text()  # the transition's own text
    late = late_refusals(own, _writing_functions(s.body))
    assert late == [], f"{s.name} refuses after it has written: {late}"


def test_the_refusal_check_can_fail():
    """Writing, then refusing, is caught: in a script and within one turn of a batch loop."""
    plain = "redis.call('SET', KEYS[1], 1)\nif x then return redis.error_reply('no') end\n"
    batch = (
        "for i = 1, n do\n  redis.call('HSET', KEYS[1 + i], 'a', 1)\n"
        "  if x then reply[i] = redis.error_reply('no') end\nend\n"
    )
    per_job = "for i = 1, n do\n  reply[i] = fence(KEYS[i], 1, 'x')\n  mark(KEYS[i])\nend\n"
    assert late_refusals(plain, set()) == ["error_reply('no') end"]
    assert late_refusals(batch, set()) == ["error_reply('no') end"]
    assert late_refusals(per_job, {"mark"}) == []


def test_includes_are_inlined_once_in_dependency_order(tmp_path):
    """A script names only what it uses; each helper arrives once, its own needs first."""
    (tmp_path / "base.lua").write_text("local base = 1\n")
    (tmp_path / "mid.lua").write_text('-- @include "base"\nlocal mid = base\n')
    (tmp_path / "top.lua").write_text('-- @include "mid"\n-- @include "base"\nlocal top = mid\n')
    body = script._expand_includes(
        '-- @include "top"\n-- @include "base"\nreturn top\n', tmp_path, (), set()
    )
    assert body.count("local base = 1") == 1
    assert body.index("local base") < body.index("local mid") < body.index("local top")
    (tmp_path / "base.lua").write_text('-- @include "top"\n')
    with pytest.raises(ValueError, match="circular"):
        script._expand_includes('-- @include "top"\n', tmp_path, (), set())


@pytest.mark.parametrize("s", SCRIPTS, ids=IDS)
def test_no_helper_is_inlined_twice_and_only_clocked_scripts_read_the_clock(s):
    assert len(re.findall(r"^local function (\w+)", s.body, re.M)) == len(
        set(re.findall(r"^local function (\w+)", s.body, re.M))
    )
    reads_time = "'TIME'" in s.body
    assert reads_time == bool(re.search(r"\bnow_(ms|us)\b", s.body.replace("local now_", "")))
    if s.name == "page":
        assert not reads_time  # a read-only page never asks for the server's clock


def test_scripts_take_their_bounds_from_python():
    """``${NAME}`` is filled in from engine/bounds.py at load; an unknown name fails loudly."""
    from echomq_django.engine import bounds

    assert f"math.min(tonumber(ARGV[2]), {bounds.PAGE_MAX})" in script.load("page").body
    assert f"int_in(row[at.lease_ms], 1, {bounds.MAX_LEASE_MS}," in script.load("claim").body
    assert all("${" not in s.body for s in SCRIPTS)
    with pytest.raises(ValueError, match="NO_SUCH_BOUND"):
        script.Script.from_source("x", "return ${NO_SUCH_BOUND}")


def _body_indexes(s: script.Script, array: str) -> set[int]:
    """The literal ``KEYS[n]`` / ``ARGV[n]`` indexes the script's code (not its comments) reads."""
    code = "\n".join(ln for ln in s.body.splitlines() if not ln.lstrip().startswith("--"))
    return {int(n) for n in re.findall(rf"\b{array}\[(\d+)\]", code)}


@pytest.mark.parametrize("s", SCRIPTS, ids=IDS)
def test_the_header_declares_every_key_and_argument_the_code_reads(s):
    """The header is the call's single source: it parses at load (every name is a
    QueueKeys key), and it declares every KEYS[n] / ARGV[n] the code reads, in order."""
    sig = s.signature
    assert sig.keys, "a transition names its queue by KEYS[1]"
    assert _body_indexes(s, "KEYS") <= set(range(1, len(sig.keys) + 1))
    if not sig.key_list:
        assert max(_body_indexes(s, "KEYS"), default=0) == len(sig.keys) or s.name in (
            "delete", "stats",  # they read KEYS[1..5] in a loop over the places
        )  # fmt: skip
    fixed = [int(at) for at, _ in sig.argv if at.isdigit()]
    assert fixed == list(range(1, len(fixed) + 1))
    assert _body_indexes(s, "ARGV") <= set(fixed)
    assert all(text for _, text in sig.argv)


@pytest.mark.parametrize("s", SCRIPTS, ids=IDS)
def test_a_call_builds_as_many_keys_as_the_header_declares(s):
    keys, one = QueueKeys.of("q"), {"job": new_job_id(), "claim": "c-1", "schedule": "s",
                                    "state_set": "dead"}  # fmt: skip
    named = {k: one[k] for k in s.signature.keys if k in one}
    named |= {k: [new_job_id(), new_job_id()] for k in s.signature.key_list if k == "job"}
    named |= {k: ["ab" * 32] for k in s.signature.key_list if k == "idempotency"}
    built = s.keys_for(keys, **named)
    assert len(built) == len(s.signature.keys) + sum(len(named[k]) for k in s.signature.key_list)
    assert all(key.startswith(keys.base) for key in built)  # one slot
    with pytest.raises(TypeError, match="no KEYS named"):
        s.keys_for(keys, **named, nothing="x")


def test_the_engine_builds_every_script_call_from_its_header():
    """No KEYS list written by hand: each ``script.load`` call site takes its keys
    from ``keys_for``, and the pipelined builders' calls have the header's count."""
    for path in Path(script.__file__).parent.glob("*.py"):
        text = path.read_text()
        assert not re.search(r"(Call|connector\.run)\(\s*script\.load\([^)]*\),\s*\[", text), path
    job_id, keys = new_job_id(), QueueKeys.of("q")
    new = NewJob(payload="{}", task="t", idempotency_key="k")
    calls = {  # the call, and how many keys its lists hold
        "enqueue": (Jobs._enqueue_call(keys, [new]), 2),  # a row and its idempotency key
        "complete": (Jobs._complete_call([(keys, job_id, 1, "null", -1)]), 1),
        "extend": (Jobs._extend_call("q", job_id, 1, 1000, -1), 0),
        "release": (Jobs._release_call("q", job_id, 1, False, True), 0),
    }
    for name, (call, listed) in calls.items():
        assert call.script.name == name
        assert len(call.keys) == len(call.script.signature.keys) + listed


def test_a_header_naming_no_key_fails_at_load():
    with pytest.raises(ValueError, match="'pendings' is no key of QueueKeys"):
        script.Script.from_source("x", "-- KEYS[1] pendings ZSET\nreturn 1")
    with pytest.raises(ValueError, match="is not `KEYS"):
        script.Script.from_source("x", "-- KEYS[1] the pending set\nreturn 1")
    with pytest.raises(ValueError, match="out of order"):
        script.Script.from_source("x", "-- KEYS[2] pending ZSET   KEYS[1] active ZSET\nreturn 1")
    with pytest.raises(ValueError, match="'queue' is no key"):  # a field, not a key
        script.Script.from_source("x", "-- KEYS[1] queue STRING\nreturn 1")
