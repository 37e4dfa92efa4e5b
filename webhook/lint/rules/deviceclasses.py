"""Names of DeviceClasses that do not exist: in claims and templates, and in dragate policies.

Judged only against the DeviceClasses lint knows (`--state`, or DeviceClass objects among the
inputs); knowing none, nothing is reported. A warning: the classes known may be only some of the
cluster's (a driver's chart installs its own), so `--strict` makes it fail the run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.lint.findings import WARNING, Finding, Path
from webhook.lint.objects import (
    POLICY_API_VERSION,
    as_list,
    as_map,
    kind_of,
    leaves_of,
    requests_of,
)
from webhook.lint.registry import Known, RuleInfo, register_known
from webhook.types import unknown_class

UNKNOWN = RuleInfo(
    "unknown-device-class", WARNING, "a DeviceClass name that is not among the classes known"
)


@register_known(UNKNOWN)
def check_class_names(obj: Mapping[str, Any], known: Known) -> Iterator[Finding]:
    if not known.device_classes:
        return
    for path, name in class_names(obj):
        unknown = unknown_class(name, known.device_classes)
        if unknown is not None:
            fix = unknown.hint or f"use one of: {', '.join(sorted(known.device_classes))}"
            yield Finding(UNKNOWN.id, WARNING, path, f"{unknown.what}; {_consequence(obj)}", fix)


def class_names(obj: Mapping[str, Any]) -> Iterator[tuple[Path, str]]:
    """Each DeviceClass name the object gives, with its path: requests and subrequests of a
    claim or template, a Tenant's `allowedDeviceClasses` and quota, a DeviceClassPolicy's
    `deviceClassNames`, a LegacyResourceMapping's resources."""
    for request in requests_of(obj):
        for leaf in leaves_of(request):
            if leaf.device_class:
                yield (*leaf.path, "deviceClassName"), leaf.device_class
    if obj.get("apiVersion") == POLICY_API_VERSION:
        yield from _policy_names(kind_of(obj), as_map(obj.get("spec")))


def _policy_names(kind: str, spec: Mapping[str, Any]) -> Iterator[tuple[Path, str]]:
    if kind == "Tenant":
        yield from _names(("spec", "allowedDeviceClasses"), spec.get("allowedDeviceClasses"))
        yield from _entry_names(("spec", "quota"), spec.get("quota"))
    elif kind == "DeviceClassPolicy":
        yield from _names(("spec", "deviceClassNames"), spec.get("deviceClassNames"))
    elif kind == "LegacyResourceMapping":
        yield from _entry_names(("spec", "resources"), spec.get("resources"))


def _names(path: Path, value: Any) -> Iterator[tuple[Path, str]]:
    for i, name in enumerate(as_list(value)):
        if isinstance(name, str) and name:
            yield (*path, i), name


def _entry_names(path: Path, value: Any) -> Iterator[tuple[Path, str]]:
    for i, entry in enumerate(as_list(value)):
        name = as_map(entry).get("deviceClassName")
        if isinstance(name, str) and name:
            yield (*path, i, "deviceClassName"), name


def _consequence(obj: Mapping[str, Any]) -> str:
    """What the wrong name does, said where it does it."""
    if obj.get("apiVersion") == POLICY_API_VERSION:
        return "this entry never matches a request"
    return "the API server accepts the claim, and no device is ever allocated for it"
