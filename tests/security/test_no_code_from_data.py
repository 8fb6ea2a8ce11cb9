"""Static proof that the package never deserialises code and imports only what settings name.

Read with ``ast`` (not grep: comments and docstrings that mention pickle do not
count, and ``from x import y as z`` does not hide an import):

* no module of ``echomq_django`` imports a deserialiser that can build
  arbitrary objects (pickle and friends, marshal, shelve, yaml);
* nothing calls ``eval``, ``exec``, ``compile`` or ``__import__``;
* dynamic imports (``import_module``, ``import_string``) appear only in the
  functions listed below, whose arguments come from settings, never from a row.
  The behavioural half of this proof is ``test_corrupt_rows.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import echomq_django

PACKAGE = Path(echomq_django.__file__).parent
UNSAFE_MODULES = {
    "pickle", "_pickle", "cPickle", "dill", "cloudpickle", "jsonpickle", "marshal",
    "shelve", "yaml", "copyreg",
}  # fmt: skip
UNSAFE_BUILTINS = {"eval", "exec", "compile", "__import__"}  # as bare names (re.compile is fine)
UNSAFE_ATTRIBUTES = {"eval", "exec", "__import__"}  # builtins.eval(...) and the like
DYNAMIC_IMPORTS = {"import_module", "import_string"}
# (module, function) -> where its argument comes from
ALLOWED_DYNAMIC = {
    ("discovery.py", "discover_tasks"): "TASKS[alias]['OPTIONS']['TASK_MODULES'] (settings)",
    ("discovery.py", "import_app_module"): "a module inside an installed app (app_module)",
    ("engine/worker/child.py", "resolve"): "the worker's own handler path (Worker(child_handler=))",
}


def _sources() -> list[tuple[str, ast.Module]]:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 10, "the package's modules were not found"
    return [(str(p.relative_to(PACKAGE)), ast.parse(p.read_text(), str(p))) for p in files]


def _called_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _unsafe(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Name):
        return node.func.id in UNSAFE_BUILTINS
    return isinstance(node.func, ast.Attribute) and node.func.attr in UNSAFE_ATTRIBUTES


def _enclosing_functions(tree: ast.Module) -> dict[ast.AST, str]:
    """Each node's innermost enclosing function (ast.walk visits outer functions first)."""
    owner: dict[ast.AST, str] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            owner.update((node, fn.name) for node in ast.walk(fn) if node is not fn)
    return owner


def test_no_module_imports_a_code_deserialiser():
    found = []
    for name, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            found += [(name, m) for m in mods if m.split(".")[0] in UNSAFE_MODULES]
    assert not found


def test_nothing_evaluates_or_imports_a_string():
    bad = [
        (name, node.lineno, _called_name(node))
        for name, tree in _sources()
        for node in ast.walk(tree)
        if _unsafe(node)
    ]
    assert not bad


def test_dynamic_imports_only_where_settings_name_the_module():
    seen = set()
    for name, tree in _sources():
        owners = _enclosing_functions(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called_name(node) in DYNAMIC_IMPORTS:
                where = (name, owners.get(node, "<module>"))
                assert where in ALLOWED_DYNAMIC, f"dynamic import at {where}, line {node.lineno}"
                seen.add(where)
    assert seen == set(ALLOWED_DYNAMIC), "the allow-list names a call that no longer exists"
