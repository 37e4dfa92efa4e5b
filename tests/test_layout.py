"""The package layout keeps one meaning per name (issue: names with two meanings slow every change).

A module basename used in two packages, or a public function or class defined twice under the
same name, makes `grep` and imports ambiguous; these tests fail when one comes back.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "webhook"
ONCE = ("Verdict", "check_request", "build_context", "policy_files", "handles")
"""Names that once meant two things; each now has one definition."""


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py")


def test_no_module_basename_is_reused_across_packages() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        places[path.name].append(str(path.relative_to(PACKAGE.parent)))
    reused = {name: where for name, where in places.items() if len(where) > 1}
    assert not reused, f"module basenames with more than one place: {reused}"


@pytest.mark.parametrize("name", ONCE, ids=ONCE)
def test_name_has_one_definition(name: str) -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name
    ]
    assert len(found) <= 1, f"{name} is defined in {len(found)} places: {found}"
