"""Policy documents the loader and the API server (with the generated CRDs) must judge alike.

Each case is one document and whether the loader accepts it. The API server is expected to
give the same answer, except where `loader_only` names a rule it cannot judge alone (CEL that
must compile, uniqueness by a field not every item has); then it accepts what the loader
refuses. tests/policy/test_crds.py holds the loader to `loads`; tests/e2e/test_crds.py holds
the real kube-apiserver to `api_accepts`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from webhook.types import API_VERSION


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    spec: dict[str, Any] | None
    loads: bool
    loader_only: str = ""
    name: str = "case"

    @property
    def api_accepts(self) -> bool:
        return self.loads or bool(self.loader_only)

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": self.kind,
            "metadata": {"name": self.name},
        }
        if self.spec is not None:
            doc["spec"] = self.spec
        return doc


GPU = "gpu.nvidia.com"
QUOTA = {"deviceClassName": GPU, "maxDevices": 4}
NS = {"namespaces": ["team-a"]}


def tenant(case_id: str, spec: dict[str, Any] | None, loads: bool, **kw: Any) -> Case:
    return Case(case_id, "Tenant", spec, loads, **kw)


def selector(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {"namespaceSelector": {"matchExpressions": list(expressions)}}


CASES = [
    # --- Tenant
    tenant("tenant-valid", {**NS, "quota": [QUOTA], "adminAccess": True,
                            "allowedDeviceClasses": [GPU], "legacyMappingAction": "Deny"}, True),
    tenant("tenant-selector", selector({"key": "team", "operator": "In", "values": ["a"]}), True),
    tenant("tenant-labels", {"namespaceSelector": {"matchLabels": {"team": "a"}}}, True),
    tenant("tenant-exists", selector({"key": "team", "operator": "Exists"}), True),
    tenant("tenant-unknown-field", {**NS, "quotas": [QUOTA]}, False),
    tenant("tenant-unknown-nested", {**NS, "quota": [{**QUOTA, "maxDevice": 1}]}, False),
    tenant("tenant-namespaces-not-list", {"namespaces": "team-a"}, False),
    tenant("tenant-admin-access-string", {**NS, "adminAccess": "true"}, False),
    tenant("tenant-max-devices-string", {**NS, "quota": [{**QUOTA, "maxDevices": "4"}]}, False),
    tenant("tenant-bad-enum", {**NS, "legacyMappingAction": "rewrite"}, False),
    tenant("tenant-quota-no-class", {**NS, "quota": [{"maxDevices": 1}]}, False),
    tenant("tenant-quota-no-limit", {**NS, "quota": [{"deviceClassName": GPU}]}, False),
    tenant("tenant-quota-negative", {**NS, "quota": [{**QUOTA, "maxDevices": -1}]}, False),
    tenant("tenant-no-namespaces", {"quota": [QUOTA]}, False),
    tenant("tenant-empty-namespaces", {"namespaces": []}, False),
    tenant("tenant-empty-selector", {"namespaceSelector": {}}, False),
    tenant("tenant-in-without-values", selector({"key": "team", "operator": "In"}), False),
    tenant("tenant-exists-with-values",
           selector({"key": "t", "operator": "Exists", "values": ["a"]}), False),
    tenant("tenant-bad-operator", selector({"key": "t", "operator": "in", "values": ["a"]}),
           False),
    tenant("tenant-namespace-pattern", {"namespaces": ["Team_A"]}, False),
    tenant("tenant-namespace-too-long", {"namespaces": ["a" * 64]}, False),
    tenant("tenant-namespace-repeated", {"namespaces": ["team-a", "team-a"]}, False),
    tenant("tenant-quota-class-repeated", {**NS, "quota": [QUOTA, QUOTA]}, False),
    tenant("tenant-class-too-long", {**NS, "allowedDeviceClasses": ["a" * 254]}, False),
    tenant("tenant-class-longest", {**NS, "allowedDeviceClasses": ["a" * 253]}, True),
    tenant("tenant-no-spec", None, False),
    Case("tenant-name-not-dns", "Tenant", NS, False, name="Team_A"),
    # --- DeviceClassPolicy
    Case("class-policy-valid", "DeviceClassPolicy", {
        "deviceClassNames": [GPU], "maxCountPerRequest": 8, "allowAllocationModeAll": False,
        "validations": [{"expression": "request.count <= 4", "message": "at most 4",
                         "action": "Warn"}]}, True),
    Case("class-policy-empty-spec", "DeviceClassPolicy", {}, True),
    Case("class-policy-count-zero", "DeviceClassPolicy", {"maxCountPerRequest": 0}, False),
    Case("class-policy-validation-no-expression", "DeviceClassPolicy",
         {"validations": [{"message": "m"}]}, False),
    Case("class-policy-validation-empty-expression", "DeviceClassPolicy",
         {"validations": [{"expression": ""}]}, False),
    Case("class-policy-bad-action", "DeviceClassPolicy",
         {"validations": [{"expression": "true", "action": "Block"}]}, False),
    Case("class-policy-cel-does-not-compile", "DeviceClassPolicy",
         {"validations": [{"expression": "request.count <="}]}, False,
         loader_only="CEL is compiled by the loader; the CRD stores the text"),
    Case("class-policy-classes-not-list", "DeviceClassPolicy", {"deviceClassNames": GPU}, False),
    # --- LegacyResourceMapping
    Case("mapping-valid", "LegacyResourceMapping", {"action": "Rewrite", "resources": [
        {"resourceName": "nvidia.com/gpu", "deviceClassName": GPU},
        {"resourceNamePrefix": "nvidia.com/mig-", "deviceClassName": "mig.nvidia.com",
         "selector": "device.attributes['gpu.nvidia.com'].profile == '{suffix}'"}]}, True),
    Case("mapping-name-and-prefix", "LegacyResourceMapping", {"resources": [
        {"resourceName": "a/b", "resourceNamePrefix": "a/", "deviceClassName": GPU}]}, False),
    Case("mapping-no-name", "LegacyResourceMapping",
         {"resources": [{"deviceClassName": GPU}]}, False),
    Case("mapping-no-resources", "LegacyResourceMapping", {"action": "Warn"}, False),
    Case("mapping-bad-action", "LegacyResourceMapping",
         {"action": "Audit", "resources": [{"resourceName": "a/b", "deviceClassName": GPU}]},
         False),
    Case("mapping-name-repeated", "LegacyResourceMapping", {"resources": [
        {"resourceName": "a/b", "deviceClassName": GPU},
        {"resourceName": "a/b", "deviceClassName": "other"}]}, False,
         loader_only="uniqueness by resourceName, which not every item has"),
    # --- Settings
    Case("settings-valid", "Settings", {
        "denyUnknownNamespaces": True, "feasibility": "Warn", "whenStateUnavailable": "Deny",
        "adminAccessEditors": ["alice", "group:platform-admins"],
        "exemptNamespaces": ["kube-system"],
        "exemptServiceAccounts": ["system:serviceaccount:ci:runner"],
        "gangKinds": ["Job", "LeaderWorkerSet"]}, True),
    Case("settings-gangs-off", "Settings", {"gangKinds": []}, True),
    Case("settings-gang-kind-unknown", "Settings", {"gangKinds": ["Deployment"]}, False),
    Case("settings-no-spec", "Settings", None, True),
    Case("settings-editor-bare-group", "Settings", {"adminAccessEditors": ["group:"]}, False),
    Case("settings-editor-group-prefix", "Settings", {"adminAccessEditors": ["grou"]}, True),
    Case("settings-service-account-bare", "Settings", {"exemptServiceAccounts": ["ci"]}, False),
    Case("settings-service-account-space", "Settings",
         {"exemptServiceAccounts": ["system:serviceaccount:ci:a b"]}, False),
    Case("settings-feasibility-audit", "Settings", {"feasibility": "Audit"}, False),
]  # fmt: skip


# --- every field: a full document per kind, and each of its fields spoiled in turn --------------

FULL: dict[str, dict[str, Any]] = {
    "Tenant": {
        "namespaces": ["team-a"],
        "namespaceSelector": {
            "matchLabels": {"team": "a"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}],
        },
        "allowedDeviceClasses": [GPU],
        "adminAccess": True,
        "quota": [{"deviceClassName": GPU, "maxDevices": 4, "maxDevicesPerClaim": 2}],
        "legacyMappingAction": "Deny",
        "enforcement": "Warn",
    },
    "DeviceClassPolicy": {
        "deviceClassNames": [GPU],
        "maxCountPerRequest": 8,
        "allowAllocationModeAll": False,
        "validations": [{"expression": "request.count <= 4", "message": "m", "action": "Warn"}],
        "failurePolicy": "Ignore",
        "enforcement": "Audit",
    },
    "LegacyResourceMapping": {
        "action": "Rewrite",
        "resources": [
            {"resourceName": "nvidia.com/gpu", "deviceClassName": GPU},
            {"resourceNamePrefix": "nvidia.com/mig-", "deviceClassName": "mig.nvidia.com",
             "selector": "device.attributes['gpu.nvidia.com'].profile == '{suffix}'"},
        ],
    },
    "Settings": {
        "denyUnknownNamespaces": True,
        "feasibility": "Warn",
        "whenStateUnavailable": "Deny",
        "adminAccessEditors": ["group:platform-admins"],
        "exemptNamespaces": ["kube-system"],
        "exemptServiceAccounts": ["system:serviceaccount:ci:runner"],
        "gangKinds": ["Job", "JobSet"],
    },
}  # fmt: skip
"""A valid document per kind holding every field the loader reads (a test says so: a field
added to a kind needs a value here, and then is spoiled below with no further work)."""

Step = str | int
WRONG_TYPE: dict[type, Any] = {str: 12, bool: "true", int: "4", list: "x", dict: "x"}


def leaves(value: Any, at: tuple[Step, ...] = ()) -> Iterator[tuple[tuple[Step, ...], Any]]:
    """Every (path, value) inside a document's spec, containers included."""
    yield at, value
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from leaves(inner, (*at, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from leaves(inner, (*at, i))


def spoiled(spec: dict[str, Any], at: tuple[Step, ...], change: Callable[[Any], Any]) -> Any:
    copy = json.loads(json.dumps(spec))
    if not at:
        return change(copy)
    parent = copy
    for step in at[:-1]:
        parent = parent[step]
    parent[at[-1]] = change(parent[at[-1]])
    return copy


def replaced_by(wrong: Any) -> Callable[[Any], Any]:
    return lambda _: wrong


def with_unknown(value: dict[str, Any]) -> dict[str, Any]:
    return {**value, "unknownField": 1}


def spoiled_cases() -> Iterator[Case]:
    """Each field of FULL with a value of the wrong type, and each mapping with a field it
    does not have: the loader and the API server both refuse every one."""
    for kind, spec in FULL.items():
        for at, value in leaves(spec):
            where = ".".join(str(step) for step in ("spec", *at))
            wrong = WRONG_TYPE[type(value)]
            if at:
                bad = spoiled(spec, at, replaced_by(wrong))
                yield Case(f"{kind}:{where}:wrong-type", kind, bad, False)
            if isinstance(value, dict) and at[-1:] != ("matchLabels",):  # a map takes any key
                bad = spoiled(spec, at, with_unknown)
                yield Case(f"{kind}:{where}:unknown-field", kind, bad, False)


CASES += [Case(f"{kind}:full", kind, spec, True) for kind, spec in FULL.items()]
CASES += list(spoiled_cases())
