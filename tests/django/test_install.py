"""``pip install`` brings the Tasks framework on every supported stack.

Django 5.2 needs the django-tasks backport whatever the Python (5.2 supports 3.10
to 3.13); a marker on the Python version left it out on 3.12+. The static test
evaluates the declared requirements for each supported Python; the real one
(``ECHOMQ_INSTALL_CHECK=1``, set by ``scripts/test`` for its Django 5.2 on
Python 3.12 stack) asks pip to resolve the package with Django 5.2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("3.11", "3.12", "3.13")


def required(lines: list[str], python: str) -> set[str]:
    env = {"python_version": python, "python_full_version": f"{python}.0"}
    reqs = [Requirement(line) for line in lines]
    return {r.name.lower() for r in reqs if r.marker is None or r.marker.evaluate(env)}


def requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


@pytest.mark.parametrize("python", PYTHONS)
def test_the_backport_is_required_on_every_python(python):
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for source, lines in [
        ("pyproject.toml", declared),
        ("requirements.txt", requirement_lines(ROOT / "requirements.txt")),
    ]:
        assert {"django", "django-tasks"} <= required(lines, python), source


@pytest.mark.skipif(
    not os.environ.get("ECHOMQ_INSTALL_CHECK"), reason="resolves from the package index"
)
def test_pip_resolves_the_backport_with_django_52(tmp_path):
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
         "--disable-pip-version-check", "--report", str(report), str(ROOT), "Django~=5.2.0"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    names = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert {"echomq-django", "django-tasks"} <= names
