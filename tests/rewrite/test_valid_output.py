"""Everything the rewriter produces must pass the API server's schema (strict: no unknown
fields), in the newest Kubernetes version kubernetes-validate knows (>= 1.34, DRA v1 GA).

The rewrite writes one output whatever the target minor, so each field of it is also in the
pinned schema (webhook/defaults/kube/schemas-<minor>.json) of every supported minor, 1.35 to
1.37: Pods and ResourceClaimTemplates walked whole, a workload's pod templates as Pod specs,
and what a schema leaves open (maps, RawExtension) not walked further.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

from webhook.policy.kubetypes import pinned_schemas
from webhook.policy.loading import default_mappings
from webhook.rewrite import pod_specs, rewrite_object
from webhook.types.kubeversions import SUPPORTED

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


def unknown_fields(schemas: Mapping[str, Any], node: Any, value: Any, path: str) -> Iterator[str]:
    """Dotted paths in `value` that the schema `node` has no property for."""
    node = _resolved(schemas, node)
    if isinstance(value, list):
        items = node.get("items") if isinstance(node, Mapping) else None
        for index, item in enumerate(value):
            yield from unknown_fields(schemas, items, item, f"{path}[{index}]")
        return
    if not isinstance(value, Mapping) or not isinstance(node, Mapping):
        return
    properties = node.get("properties")
    for key, item in value.items():
        if properties is None:
            yield from unknown_fields(schemas, node.get("additionalProperties"), item, path)
        elif key not in properties:
            yield f"{path}.{key}"
        else:
            yield from unknown_fields(schemas, properties[key], item, f"{path}.{key}")


def _resolved(schemas: Mapping[str, Any], node: Any) -> Any:
    while isinstance(node, Mapping) and "$ref" in node:
        node = schemas["definitions"].get(node["$ref"])
    return node


def walked(obj: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(root kind, path, value) of what the pinned schemas describe in a produced object."""
    if obj["kind"] in ("Pod", "ResourceClaimTemplate"):
        yield obj["kind"], obj["kind"], obj
        return
    for spec in pod_specs(obj):
        yield "Pod", f"{obj['kind']}.<pod template>.spec", {"spec": spec}


@pytest.mark.parametrize("minor", SUPPORTED)
@pytest.mark.parametrize("case", CASES)
def test_every_field_written_is_in_each_supported_minors_schema(case: str, minor: str) -> None:
    schemas = pinned_schemas(minor)
    found = [
        field
        for obj in produced(case)
        for kind, path, value in walked(obj)
        for field in unknown_fields(schemas, {"$ref": schemas["roots"][kind]}, value, path)
    ]
    assert not found, f"not in Kubernetes {minor}: {found}"


def test_a_field_a_minor_lacks_is_found() -> None:
    """The walk can fail: `spec.schedulingGroup` (1.36) is not in 1.35's Pod."""
    schemas = pinned_schemas("1.35")
    pod = {"spec": {"schedulingGroup": {"podGroupName": "g"}, "containers": []}}
    root = {"$ref": schemas["roots"]["Pod"]}
    assert list(unknown_fields(schemas, root, pod, "Pod")) == ["Pod.spec.schedulingGroup"]
