"""No object shape crashes the rewriter: every value of every golden input replaced in turn by
null, a string, a number, an empty list and an empty mapping. Manifests in git hold all of these
(`metadata:` left empty is common); a crash would abort a whole `migrate` run."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.policy.loading import default_mappings
from webhook.rewrite import rewrite_object

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.name.removesuffix(".in.yaml") for p in GOLDEN.glob("*.in.yaml"))
REPLACEMENTS: list[Any] = [None, "x", 0, [], {}]
Step = str | int


def paths(node: Any, prefix: tuple[Step, ...] = ()) -> Iterator[tuple[Step, ...]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*prefix, index)
            yield from paths(value, (*prefix, index))


def replaced(obj: dict[str, Any], path: tuple[Step, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node: Any = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize("case", CASES)
def test_no_shape_crashes(case: str) -> None:
    obj = yaml.safe_load((GOLDEN / f"{case}.in.yaml").read_text())
    tried = 0
    for path in paths(obj):
        for value in REPLACEMENTS:
            result = rewrite_object(replaced(obj, path, value), default_mappings())
            second = rewrite_object(result.object, default_mappings())
            assert not second.changed, (path, value)
            tried += 1
    assert tried > 0


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("unknown-crd", 'example.com/GpuThing "thing" not migrated (unknown kind)'),
        ("extensions-deployment", 'extensions/Deployment "old" not migrated (unknown kind)'),
    ],
    ids=["unknown-crd", "old-api-group"],
)
def test_leftover_legacy_requests_get_a_note(case: str, expected: str) -> None:
    obj = yaml.safe_load((GOLDEN / f"{case}.in.yaml").read_text())
    result = rewrite_object(obj, default_mappings())
    assert not result.changed
    assert any(expected in n for n in result.notes)


@pytest.mark.parametrize(
    ("api_version", "kind", "migrated"),
    [
        ("batch/v1", "Job", True),
        ("batch.volcano.sh/v1alpha1", "Job", False),  # its pods live under spec.tasks
        ("example.com/v1", "Deployment", False),
        ("apps/v1", "Deployment", True),
    ],
    ids=["batch-job", "volcano-job-no-tasks", "foreign-deployment", "apps-deployment"],
)
def test_kinds_are_matched_by_group_and_kind(api_version: str, kind: str, migrated: bool) -> None:
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    obj = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "w"},
        "spec": {"template": pod},
    }
    result = rewrite_object(obj, default_mappings())
    assert result.changed is migrated
    assert migrated or any("not migrated" in n for n in result.notes)
