"""Golden files: one input per workload kind, the expected rewrite beside it.

Regenerate with `DRAGATE_UPDATE_GOLDENS=1 pytest tests/rewrite/test_golden.py` and review the
diff: the outputs are the contract users see in their migrated manifests.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.policy.loading import default_mappings
from webhook.rewrite import rewrite_object

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.name.removesuffix(".in.yaml") for p in GOLDEN.glob("*.in.yaml"))
UPDATE = os.environ.get("DRAGATE_UPDATE_GOLDENS") == "1"


def outcome(obj: dict[str, Any]) -> dict[str, Any]:
    result = rewrite_object(obj, default_mappings())
    return {
        "changed": result.changed,
        "object": result.object,
        "templates": list(result.templates),
        "notes": list(result.notes),
        "denied": list(result.denied),
    }


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    obj = yaml.safe_load((GOLDEN / f"{case}.in.yaml").read_text())
    got = outcome(obj)
    expected_file = GOLDEN / f"{case}.out.yaml"
    if UPDATE:
        expected_file.write_text(yaml.safe_dump(got, sort_keys=False, width=4096))
    assert got == yaml.safe_load(expected_file.read_text())


@pytest.mark.parametrize("case", CASES)
def test_second_pass_changes_nothing(case: str) -> None:
    obj = yaml.safe_load((GOLDEN / f"{case}.in.yaml").read_text())
    once = rewrite_object(obj, default_mappings()).object
    twice = rewrite_object(once, default_mappings())
    assert not twice.changed
    assert twice.object == once
    assert twice.templates == ()


@pytest.mark.parametrize("case", CASES)
def test_input_is_never_mutated(case: str) -> None:
    obj = yaml.safe_load((GOLDEN / f"{case}.in.yaml").read_text())
    snapshot = yaml.safe_load((GOLDEN / f"{case}.in.yaml").read_text())
    rewrite_object(obj, default_mappings())
    assert obj == snapshot


@pytest.mark.parametrize("case", CASES)
def test_notes_fit_a_kubectl_warning(case: str) -> None:
    obj = yaml.safe_load((GOLDEN / f"{case}.in.yaml").read_text())
    result = rewrite_object(obj, default_mappings())
    assert all(len(n) <= 120 and "\n" not in n for n in (*result.notes, *result.denied))
