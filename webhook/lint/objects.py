"""Where the DRA parts of an object live: claim specs, requests, pod specs, CEL expressions.

Every walker here is total: a value of the wrong type is skipped (other rules, or the API
server, report it), so a rule never crashes on what a person typed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.lint.findings import Path

RESOURCE_GROUP = "resource.k8s.io"
FLAT_VERSIONS = frozenset({"v1alpha3", "v1beta1"})
"""Versions whose DeviceRequest is flat (no `exactly:`); v1alpha3 had the same request shape."""
NESTED_VERSIONS = frozenset({"v1beta2", "v1"})
CLAIM_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate"})
POLICY_API_VERSION = "dragate.io/v1alpha1"

CLASS_DOMAINS: Mapping[str, str] = {
    "gpu.nvidia.com": "gpu.nvidia.com",
    "mig.nvidia.com": "gpu.nvidia.com",
    "vfio.gpu.nvidia.com": "gpu.nvidia.com",
    "compute-domain-daemon.nvidia.com": "compute-domain.nvidia.com",
    "compute-domain-default-channel.nvidia.com": "compute-domain.nvidia.com",
    "tpu.google.com": "tpu.google.com",
}
"""DeviceClass name -> the driver (attribute domain) behind it, for the well-known classes."""

POD_SPEC_PATHS: Mapping[str, Path] = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()


def dig(obj: Any, path: Path) -> Any:
    """The value at `path`, or None when any step is missing or of the wrong type."""
    for step in path:
        if isinstance(step, int):
            seq = as_list(obj)
            obj = seq[step] if 0 <= step < len(seq) else None
        else:
            obj = as_map(obj).get(step)
    return obj


def group_version(obj: Mapping[str, Any]) -> tuple[str, str]:
    """`("resource.k8s.io", "v1")` for `resource.k8s.io/v1`; `("", "v1")` for the core group."""
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str):
        return "", ""
    group, _, version = api_version.rpartition("/")
    return group, version


def kind_of(obj: Mapping[str, Any]) -> str:
    kind = obj.get("kind")
    return kind if isinstance(kind, str) else ""


def is_resource_kind(obj: Mapping[str, Any], *kinds: str) -> bool:
    return group_version(obj)[0] == RESOURCE_GROUP and kind_of(obj) in kinds


def claim_spec_path(obj: Mapping[str, Any]) -> Path | None:
    """Where the ResourceClaimSpec of a claim or template is, or None for other objects."""
    if is_resource_kind(obj, "ResourceClaim"):
        return ("spec",)
    if is_resource_kind(obj, "ResourceClaimTemplate"):
        return ("spec", "spec")
    return None


@dataclass(frozen=True)
class Request:
    """One entry of `spec.devices.requests`, with what a rule needs to judge it."""

    path: Path
    data: Mapping[str, Any]
    version: str  # the API version of the object: v1, v1beta2, v1beta1, ...

    @property
    def flat(self) -> bool:
        return self.version in FLAT_VERSIONS


@dataclass(frozen=True)
class Leaf:
    """A request or subrequest that names a class: `exactly`, a flat request, or an alternative."""

    path: Path
    data: Mapping[str, Any]
    subrequest: bool

    @property
    def device_class(self) -> str:
        value = self.data.get("deviceClassName")
        return value if isinstance(value, str) else ""


def requests_of(obj: Mapping[str, Any]) -> Iterator[Request]:
    spec_path = claim_spec_path(obj)
    if spec_path is None:
        return
    version = group_version(obj)[1]
    requests = dig(obj, (*spec_path, "devices", "requests"))
    for i, item in enumerate(as_list(requests)):
        if isinstance(item, Mapping):
            yield Request((*spec_path, "devices", "requests", i), item, version)


def leaves_of(request: Request) -> Iterator[Leaf]:
    """The class-naming parts of a request, whichever shape it was written in."""
    data = request.data
    if isinstance(data.get("exactly"), Mapping):
        yield Leaf((*request.path, "exactly"), data["exactly"], subrequest=False)
    alternatives = data.get("firstAvailable")
    for j, sub in enumerate(as_list(alternatives)):
        if isinstance(sub, Mapping):
            yield Leaf((*request.path, "firstAvailable", j), sub, subrequest=True)
    if "exactly" not in data and not alternatives:
        yield Leaf(request.path, data, subrequest=False)


def pod_spec_path(obj: Mapping[str, Any]) -> Path | None:
    """Where the pod spec of a Pod or a workload is; None for other kinds."""
    group, _ = group_version(obj)
    path = POD_SPEC_PATHS.get(kind_of(obj))
    if path is None or group not in ("", "apps", "batch"):
        return None
    return path if isinstance(dig(obj, path), Mapping) else None


@dataclass(frozen=True)
class CelSite:
    """A CEL expression in an object, and the device class it selects for (if known)."""

    path: Path
    expression: str
    device_class: str = ""
    device_selector: bool = True  # False: a policy validation (variables `request`, `object`...)

    @property
    def domain(self) -> str:
        return CLASS_DOMAINS.get(self.device_class, "")


def _selector_sites(base: Path, selectors: Any, device_class: str) -> Iterator[CelSite]:
    for k, selector in enumerate(as_list(selectors)):
        expression = dig(selector, ("cel", "expression"))
        if isinstance(expression, str):
            yield CelSite((*base, "selectors", k, "cel", "expression"), expression, device_class)


def cel_sites(obj: Mapping[str, Any]) -> Iterator[CelSite]:
    """Every CEL expression of a claim, template, DeviceClass or dragate policy."""
    for request in requests_of(obj):
        for leaf in leaves_of(request):
            yield from _selector_sites(leaf.path, leaf.data.get("selectors"), leaf.device_class)
    if is_resource_kind(obj, "DeviceClass"):
        name = dig(obj, ("metadata", "name"))
        yield from _selector_sites(
            ("spec",), dig(obj, ("spec", "selectors")), name if isinstance(name, str) else ""
        )
    if obj.get("apiVersion") == POLICY_API_VERSION:
        yield from _policy_sites(obj)


def _policy_sites(obj: Mapping[str, Any]) -> Iterator[CelSite]:
    spec = as_map(obj.get("spec"))
    classes = [c for c in as_list(spec.get("deviceClassNames")) if isinstance(c, str)]
    only_class = classes[0] if len(classes) == 1 else ""
    for i, validation in enumerate(as_list(spec.get("validations"))):
        expression = as_map(validation).get("expression")
        if isinstance(expression, str):
            path: Path = ("spec", "validations", i, "expression")
            yield CelSite(path, expression, only_class, device_selector=False)
    for i, item in enumerate(as_list(spec.get("resources"))):
        resource = as_map(item)
        selector = resource.get("selector")
        device_class = resource.get("deviceClassName")
        if isinstance(selector, str):
            yield CelSite(
                ("spec", "resources", i, "selector"),
                selector,
                device_class if isinstance(device_class, str) else "",
            )
