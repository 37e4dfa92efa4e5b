"""What the target Kubernetes minor has: fields a later or only an earlier supported minor
has, and resource.k8s.io beta versions it serves only when enabled.

Fields are judged against the pinned schemas of every supported minor (`Known.schemas`),
so a manifest written for a newer cluster is caught before the target's API server drops or
refuses the field. A field no supported minor has is left alone here: it is a typo or another
version's shape, which other rules and the API server name better.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.lint.findings import ERROR, WARNING, Finding, Path
from webhook.lint.objects import (
    RESOURCE_GROUP,
    claim_spec_path,
    dig,
    group_version,
    kind_of,
    pod_spec_path,
)
from webhook.lint.registry import Known, RuleInfo, register_known
from webhook.types.kubeversions import minor_number

NEEDS = RuleInfo(
    "field-needs-newer-kubernetes",
    ERROR,
    "a field only a later supported Kubernetes minor than the target has",
)
GONE = RuleInfo(
    "field-gone-in-kubernetes",
    ERROR,
    "a field only an earlier supported Kubernetes minor than the target has",
)
DEPRECATED = RuleInfo(
    "deprecated-api",
    WARNING,
    "resource.k8s.io/v1beta1 or v1beta2 objects: deprecated since v1, served only when enabled",
)
BETA_VERSIONS = ("v1beta1", "v1beta2")
V1_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice"})
"""The kinds resource.k8s.io/v1 serves since Kubernetes 1.34, deprecating their betas."""

Nodes = dict[str, Any]
"""Minor -> the schema node of the same place in that minor's pinned schemas (None: none)."""


@register_known(NEEDS, GONE)
def check_fields(obj: Mapping[str, Any], known: Known) -> Iterator[Finding]:
    if known.kube_version not in known.schemas:
        return
    for root, path in _walked(obj):
        nodes = {minor: _root(schemas, root, path) for minor, schemas in known.schemas.items()}
        yield from _walk(dig(obj, path), path, nodes, known)


def _walked(obj: Mapping[str, Any]) -> Iterator[tuple[str, Path]]:
    """(root kind in the pinned schemas, path of the part walked) of an object."""
    group, version = group_version(obj)
    spec = claim_spec_path(obj)
    if spec is not None and version == "v1":
        yield kind_of(obj), ("spec",)
    pod_spec = pod_spec_path(obj)
    if pod_spec is not None and (group, version) in (("", "v1"), ("apps", "v1"), ("batch", "v1")):
        yield "Pod", pod_spec


def _root(schemas: Mapping[str, Any], kind: str, path: Path) -> Any:
    """The node of `kind.spec` (a claim's spec, or the Pod's for any pod spec)."""
    ref = schemas["roots"].get(kind)
    root = _resolved(schemas, {"$ref": ref} if ref else None)
    return _child(schemas, root, "spec")


def _walk(value: Any, path: Path, nodes: Nodes, known: Known) -> Iterator[Finding]:
    target = nodes[known.kube_version]
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, (*path, index), _step(known, nodes, index), known)
        return
    if not isinstance(value, Mapping) or not isinstance(target, Mapping):
        return
    properties = target.get("properties")
    for key, item in value.items():
        if properties is None or key in properties:
            yield from _walk(item, (*path, key), _step(known, nodes, key), known)
        else:
            yield from _absent(nodes, (*path, key), key, known.kube_version)


def _absent(nodes: Nodes, path: Path, key: str, target: str) -> Iterator[Finding]:
    holders = sorted((m for m, n in nodes.items() if _has(n, key)), key=minor_number)
    later = [m for m in holders if minor_number(m) > minor_number(target)]
    dotted = Finding("", ERROR, path, "").dotted_path()
    if later:
        message = f"{dotted} needs Kubernetes {later[0]} (target {target})"
        fix = f"remove it, or target Kubernetes {later[0]} or later (`--kube-version`)"
        yield Finding(NEEDS.id, ERROR, path, message, fix)
    elif holders:
        message = (
            f"{dotted} is not in Kubernetes {target} (target); {holders[-1]} is the last "
            "minor with it"
        )
        yield Finding(GONE.id, ERROR, path, message, f"remove it for Kubernetes {target}")


def _has(node: Any, key: str) -> bool:
    return isinstance(node, Mapping) and key in (node.get("properties") or {})


def _step(known: Known, nodes: Nodes, step: str | int) -> Nodes:
    return {m: _child(known.schemas[m], node, step) for m, node in nodes.items()}


def _child(schemas: Mapping[str, Any], node: Any, step: str | int) -> Any:
    """The node one step below `node`: a list's items, a property, or a map's values."""
    if not isinstance(node, Mapping):
        return None
    if isinstance(step, int):
        return _resolved(schemas, node.get("items"))
    properties = node.get("properties")
    found = node.get("additionalProperties") if properties is None else properties.get(step)
    return _resolved(schemas, found)


def _resolved(schemas: Mapping[str, Any], node: Any) -> Any:
    while isinstance(node, Mapping) and "$ref" in node:
        node = schemas["definitions"].get(node["$ref"])
    return node


@register_known(DEPRECATED)
def check_beta_versions(obj: Mapping[str, Any], known: Known) -> Iterator[Finding]:
    group, version = group_version(obj)
    if group != RESOURCE_GROUP or version not in BETA_VERSIONS or kind_of(obj) not in V1_KINDS:
        return
    serving = f"Kubernetes {known.kube_version}" if known.kube_version else "every supported minor"
    yield Finding(
        DEPRECATED.id,
        WARNING,
        ("apiVersion",),
        f"resource.k8s.io/{version} is deprecated since resource.k8s.io/v1 (Kubernetes "
        f"1.34); {serving} serves it only when enabled "
        f"(`--runtime-config=resource.k8s.io/{version}=true`)",
        "use apiVersion resource.k8s.io/v1"
        + (", with requests nested under `exactly:`" if version == "v1beta1" else ""),
    )
