"""Claim and template rules: request shape per API version, counts, limits, names, old APIs."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from webhook.lint.findings import ERROR, Finding, Path
from webhook.lint.objects import (
    CLAIM_KINDS,
    NESTED_VERSIONS,
    RESOURCE_GROUP,
    Leaf,
    Request,
    as_list,
    as_map,
    claim_spec_path,
    dig,
    group_version,
    is_resource_kind,
    kind_of,
    leaves_of,
    requests_of,
)
from webhook.lint.registry import RuleInfo, register
from webhook.types.kubelimits import (
    ALLOCATION_RESULTS_MAX,
    CLAIM_LISTS,
    DEVICE_CONFIG_MAX,
    DEVICE_SELECTORS_MAX,
    FIRST_AVAILABLE_MAX,
)

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
REQUEST_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
)
MODES = ("ExactCount", "All")

SHAPE = RuleInfo("request-shape", ERROR, "request written in the shape of another API version")
COUNT = RuleInfo(
    "request-count",
    ERROR,
    f"count with allocationMode All, count <= 0 or > {ALLOCATION_RESULTS_MAX}",
)
LIMITS = RuleInfo("request-limits", ERROR, "more requests, subrequests, selectors than allowed")
NAME = RuleInfo("request-name", ERROR, "request or subrequest name not a unique DNS label")
ADMIN_SUB = RuleInfo("admin-access-subrequest", ERROR, "adminAccess on a firstAvailable subrequest")
REMOVED = RuleInfo(
    "removed-api", ERROR, "classic-DRA kinds/fields or alpha resource.k8s.io versions"
)
CONSTRAINT = RuleInfo("constraint-attribute", ERROR, "matchAttribute/distinctAttribute w/o domain")


def dns_label_problem(name: Any) -> str | None:
    if not isinstance(name, str) or not name:
        return "is missing"
    if len(name) > 63:
        return f"`{name}` is longer than 63 characters"
    if not DNS_LABEL.match(name):
        return (
            f"`{name}` is not a DNS label (lowercase letters, digits and '-', "
            f"starting and ending with a letter or digit)"
        )
    return None


# --------------------------------------------------------------------------- shape


@register(SHAPE)
def check_shape(obj: Mapping[str, Any]) -> Iterator[Finding]:
    for request in requests_of(obj):
        if request.flat:
            yield from _flat_shape(request)
        elif request.version in NESTED_VERSIONS:
            yield from _nested_shape(request)


def _flat_shape(request: Request) -> Iterator[Finding]:
    exactly = request.data.get("exactly")
    if exactly is None:
        return
    fields = ", ".join(f"{k}: {_short(v)}" for k, v in as_map(exactly).items())
    yield Finding(
        SHAPE.id,
        ERROR,
        (*request.path, "exactly"),
        f"`exactly:` does not exist in resource.k8s.io/{request.version}; requests there are flat",
        f"move the fields up into the request ({fields}), or use apiVersion resource.k8s.io/v1",
    )


def _nested_shape(request: Request) -> Iterator[Finding]:
    data = request.data
    flat = [k for k in REQUEST_FIELDS if k in data]
    has_exactly, has_first = "exactly" in data, "firstAvailable" in data
    version = f"resource.k8s.io/{request.version}"
    if flat and not has_exactly and not has_first:
        wrapped = ", ".join(f"{k}: {_short(data[k])}" for k in flat)
        yield Finding(
            SHAPE.id,
            ERROR,
            (*request.path, flat[0]),
            f"v1beta1-shaped request under {version}: {', '.join(flat)} must be nested "
            f"under `exactly:` (the API server rejects it: exactly one of `exactly` or "
            f"`firstAvailable` is required)",
            f"wrap them: `exactly: {{{wrapped}}}` (or set apiVersion resource.k8s.io/v1beta1)",
        )
    elif flat:
        yield Finding(
            SHAPE.id,
            ERROR,
            (*request.path, flat[0]),
            f"{', '.join(flat)} at the top of a {version} request are not fields of it",
            "move them into `exactly:` (or into each `firstAvailable` entry)",
        )
    elif not has_exactly and not has_first:
        yield Finding(
            SHAPE.id,
            ERROR,
            request.path,
            f"request has neither `exactly` nor `firstAvailable`; {version} needs exactly one",
            "add `exactly: {deviceClassName: <class>}`",
        )
    if has_exactly and has_first:
        yield Finding(
            SHAPE.id,
            ERROR,
            (*request.path, "firstAvailable"),
            "request has both `exactly` and `firstAvailable`; exactly one is allowed",
            "keep `exactly` for one kind of device, or move it into the `firstAvailable` list",
        )


def _short(value: Any) -> str:
    if isinstance(value, list):
        return f"[...{len(value)} item{'s' if len(value) != 1 else ''}]"
    if isinstance(value, Mapping):
        return "{...}"
    return str(value)


# --------------------------------------------------------------------------- counts


@register(COUNT)
def check_counts(obj: Mapping[str, Any]) -> Iterator[Finding]:
    for request in requests_of(obj):
        for leaf in leaves_of(request):
            yield from _leaf_count(leaf)


def _leaf_count(leaf: Leaf) -> Iterator[Finding]:
    data = leaf.data
    mode = data.get("allocationMode", "ExactCount")
    count = data.get("count")
    if mode not in MODES:
        yield Finding(
            COUNT.id,
            ERROR,
            (*leaf.path, "allocationMode"),
            f"allocationMode `{mode}` is not one of ExactCount, All",
            "use `allocationMode: ExactCount` with a count, or `allocationMode: All`",
        )
    if mode == "All" and "count" in data:
        yield Finding(
            COUNT.id,
            ERROR,
            (*leaf.path, "count"),
            "count must not be specified when allocationMode is 'All'",
            "remove `count` (All takes every matching device), or use allocationMode ExactCount",
        )
        return
    if "count" not in data:
        return
    if isinstance(count, bool) or not isinstance(count, int):
        yield Finding(
            COUNT.id,
            ERROR,
            (*leaf.path, "count"),
            f"count `{count}` is not an integer",
            "write a whole number of devices, e.g. `count: 1`",
        )
    elif count <= 0:
        yield Finding(
            COUNT.id,
            ERROR,
            (*leaf.path, "count"),
            f"count {count} must be greater than zero",
            "ask for at least one device (`count: 1`), or drop the request",
        )
    elif count > ALLOCATION_RESULTS_MAX:
        yield Finding(
            COUNT.id,
            ERROR,
            (*leaf.path, "count"),
            f"count {count} exceeds the claim limit of {ALLOCATION_RESULTS_MAX} devices; the "
            f"scheduler can never allocate it",
            f"ask for at most {ALLOCATION_RESULTS_MAX} devices per claim, or split the claim",
        )


# --------------------------------------------------------------------------- limits


@register(LIMITS)
def check_limits(obj: Mapping[str, Any]) -> Iterator[Finding]:
    spec_path = claim_spec_path(obj)
    if spec_path is not None:
        devices: Path = (*spec_path, "devices")
        for key, limit in CLAIM_LISTS.items():
            yield from _too_many(obj, (*devices, key), limit, f"{key} in a claim")
        for request in requests_of(obj):
            yield from _too_many(
                obj,
                (*request.path, "firstAvailable"),
                FIRST_AVAILABLE_MAX,
                "firstAvailable subrequests",
            )
            for leaf in leaves_of(request):
                yield from _too_many(
                    obj, (*leaf.path, "selectors"), DEVICE_SELECTORS_MAX, "selectors"
                )
    if is_resource_kind(obj, "DeviceClass"):
        yield from _too_many(
            obj, ("spec", "selectors"), DEVICE_SELECTORS_MAX, "selectors in a class"
        )
        yield from _too_many(
            obj, ("spec", "config"), DEVICE_CONFIG_MAX, "config entries in a class"
        )


def _too_many(obj: Mapping[str, Any], path: Path, limit: int, what: str) -> Iterator[Finding]:
    items = as_list(dig(obj, path))
    if len(items) > limit:
        yield Finding(
            LIMITS.id,
            ERROR,
            (*path, limit),
            f"{len(items)} {what}; at most {limit} are allowed",
            f"keep {limit} or fewer (split the claim, or combine selectors with `&&`)",
        )


# --------------------------------------------------------------------------- names


@register(NAME, ADMIN_SUB)
def check_names(obj: Mapping[str, Any]) -> Iterator[Finding]:
    seen: set[str] = set()
    for request in requests_of(obj):
        yield from _name(request.path, request.data.get("name"), seen, "request")
        subs: set[str] = set()
        for leaf in leaves_of(request):
            if not leaf.subrequest:
                continue
            yield from _name(leaf.path, leaf.data.get("name"), subs, "subrequest")
            if "adminAccess" in leaf.data:
                yield Finding(
                    ADMIN_SUB.id,
                    ERROR,
                    (*leaf.path, "adminAccess"),
                    "adminAccess is not a field of a firstAvailable subrequest",
                    "remove it; admin access needs a plain `exactly:` request "
                    "(`exactly: {deviceClassName: ..., adminAccess: true}`)",
                )


def _name(path: Path, name: Any, seen: set[str], what: str) -> Iterator[Finding]:
    problem = dns_label_problem(name)
    if problem is not None:
        yield Finding(
            NAME.id,
            ERROR,
            (*path, "name"),
            f"{what} name {problem}",
            f"name the {what} with a DNS label, e.g. `gpu`"
            + ("; containers refer to it as `request: <name>`" if what == "request" else ""),
        )
    elif isinstance(name, str):
        if name in seen:
            yield Finding(
                NAME.id,
                ERROR,
                (*path, "name"),
                f"{what} name `{name}` is used twice",
                f"give every {what} its own name",
            )
        seen.add(name)


# --------------------------------------------------------------------------- removed APIs

REMOVED_KINDS = {
    "ResourceClass": "use a DeviceClass (resource.k8s.io/v1) selecting the driver's devices",
    "PodSchedulingContext": "delete it; the scheduler allocates structured claims itself",
    "ResourceClaimParameters": "put the parameters in the claim's selectors and "
    "`spec.devices.config[].opaque`",
    "ResourceClassParameters": "put them in a DeviceClass's selectors and `spec.config`",
}
REMOVED_VERSIONS = {"v1alpha1", "v1alpha2"}
ALPHA3_KINDS = CLAIM_KINDS | {"DeviceClass", "ResourceSlice"}


@register(REMOVED, CONSTRAINT)
def check_removed(obj: Mapping[str, Any]) -> Iterator[Finding]:
    group, version = group_version(obj)
    if group != RESOURCE_GROUP:
        return
    kind = kind_of(obj)
    if kind in REMOVED_KINDS:
        yield Finding(
            REMOVED.id,
            ERROR,
            ("kind",),
            f"{kind} was removed with classic DRA in Kubernetes 1.32",
            REMOVED_KINDS[kind],
        )
        return
    if version in REMOVED_VERSIONS or (version == "v1alpha3" and kind in ALPHA3_KINDS):
        yield Finding(
            REMOVED.id,
            ERROR,
            ("apiVersion",),
            f"resource.k8s.io/{version} {kind} is not served by current clusters "
            f"(1.34+ serve v1; v1beta1/v1beta2 only when enabled)",
            "use apiVersion resource.k8s.io/v1, with requests nested under `exactly:`",
        )
    spec_path = claim_spec_path(obj)
    if spec_path is not None:
        yield from _classic_fields(obj, spec_path)
        yield from _constraints(obj, spec_path)


def _classic_fields(obj: Mapping[str, Any], spec_path: Path) -> Iterator[Finding]:
    spec = as_map(dig(obj, spec_path))
    if "parametersRef" in spec:
        yield Finding(
            REMOVED.id,
            ERROR,
            (*spec_path, "parametersRef"),
            "`parametersRef` belongs to classic DRA, removed in Kubernetes 1.32",
            "describe the devices in `spec.devices.requests` and pass driver settings in "
            "`spec.devices.config[].opaque`",
        )
    if "resourceClassName" in spec:
        yield Finding(
            REMOVED.id,
            ERROR,
            (*spec_path, "resourceClassName"),
            "`resourceClassName` belongs to classic DRA, removed in Kubernetes 1.32",
            "request devices with `spec.devices.requests[].exactly.deviceClassName`",
        )
    if "controller" in spec:
        yield Finding(
            REMOVED.id,
            ERROR,
            (*spec_path, "controller"),
            "`spec.controller` belongs to classic DRA, removed in Kubernetes 1.32",
            "remove it; allocation is done by the scheduler from ResourceSlices",
        )


def _constraints(obj: Mapping[str, Any], spec_path: Path) -> Iterator[Finding]:
    constraints = dig(obj, (*spec_path, "devices", "constraints"))
    for i, constraint in enumerate(as_list(constraints)):
        for key in ("matchAttribute", "distinctAttribute"):
            value = as_map(constraint).get(key)
            if not isinstance(value, str):
                continue
            path: Path = (*spec_path, "devices", "constraints", i, key)
            domain, _, name = value.rpartition("/")
            if not domain:
                yield Finding(
                    CONSTRAINT.id,
                    ERROR,
                    path,
                    f"{key} `{value}` has no domain; constraints need a fully qualified name",
                    f"use `<domain>/{value}`, e.g. `gpu.nvidia.com/{value}`"
                    if value not in ("pcieRoot", "pciBusID")
                    else f"use `resource.kubernetes.io/{value}`",
                )
            elif domain == "gpu.nvidia.com" and name in ("index", "minor", "pcieBusID"):
                yield Finding(
                    "stale-attribute",
                    ERROR,
                    path,
                    f"{key} `{value}`: the NVIDIA DRA driver no longer publishes `{name}`",
                    "use `resource.kubernetes.io/pcieRoot` to keep devices on one PCIe root, or "
                    "`gpu.nvidia.com/parentUUID` to keep MIG devices on one GPU",
                )
