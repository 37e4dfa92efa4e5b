"""Everything the rewriter produces must pass the API server's schema (strict: no unknown
fields), in the newest Kubernetes version kubernetes-validate knows (>= 1.34, DRA v1 GA)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

from webhook.policy.loading import default_mappings
from webhook.rewrite import pod_specs, rewrite_object

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.name.removesuffix(".in.yaml") for p in GOLDEN.glob("*.in.yaml"))
VERSION = latest_version()
BUILTIN = {"v1", "apps/v1", "batch/v1", "resource.k8s.io/v1"}


def produced(case: str) -> list[dict[str, Any]]:
    """The rewritten object (or, for custom resources, its pod templates as Pods) + templates."""
    obj = yaml.safe_load((GOLDEN / f"{case}.in.yaml").read_text())
    result = rewrite_object(obj, default_mappings())
    new = dict(result.object)
    items = new["items"] if new["kind"] == "List" else [new]
    objects = [i for i in items if i["apiVersion"] in BUILTIN]
    objects += [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": s}
        for i in items
        if i["apiVersion"] not in BUILTIN
        for s in pod_specs(i)
    ]
    return objects + [dict(t) for t in result.templates]


def test_version_is_new_enough() -> None:
    assert tuple(int(p) for p in VERSION.split(".")[:2]) >= (1, 34)


@pytest.mark.parametrize("case", CASES)
def test_schema_valid(case: str) -> None:
    for obj in produced(case):
        kubernetes_validate.validate(obj, VERSION, strict=True)
