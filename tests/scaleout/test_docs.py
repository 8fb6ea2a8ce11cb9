"""docs/scaling.md says what the code does: its ACL list is the one acl.py grants."""

from __future__ import annotations

import re
from pathlib import Path

from echomq_django.engine.acl import worker_acl_rules

DOC = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"


def test_the_documented_minimal_acl_is_the_one_the_code_grants():
    block = DOC.read_text().split("## The minimal ACL")[1].split("```")[1]
    documented = set(re.findall(r"\+([a-z|]+)", block))
    granted = {rule[1:] for rule in worker_acl_rules().split() if rule.startswith("+")}
    assert documented == granted
    assert "~emq:*" in block and "-@all" in block
