"""The four policy kinds as schemas: which fields each has, what they must hold, what they become.

This is the policy file contract (docs/policy.md, "Policy files") written once, as data, so
unknown fields, wrong types and bad values all come from `webhook.policy.schema` in one voice.
Rules that tie fields of one object together live in the small `check` functions beside their
schema; rules across documents (duplicate names, shared namespaces) live in
`webhook.policy.loading`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.policy.celspec import (
    SAMPLE_SUFFIX,
    SELECTOR_VARIABLES,
    VALIDATION_VARIABLES,
    Cel,
    Compiled,
)
from webhook.policy.kubetypes import needs_newer, validation_types
from webhook.policy.schema import (
    Anything,
    Bool,
    Int,
    ListOf,
    MapOf,
    Obj,
    OneOf,
    Path,
    Report,
    Rule,
    Spec,
    Str,
)
from webhook.types import (
    API_VERSION,
    GANG_KINDS,
    Action,
    DeviceClassPolicy,
    FailurePolicy,
    LabelRequirement,
    LabelSelector,
    LegacyResourceMapping,
    MappingAction,
    QuotaLimit,
    ResourceMapping,
    Settings,
    Source,
    Tenant,
    Validation,
)

# Patterns read alike by Python and Go's RE2 (they are the CRDs' `pattern` too): no lookaround.
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_EDITOR = re.compile(  # any user name, or "group:" and a name: every string but "group:"
    r"group:.+|[^g].*|g([^r].*)?|gr([^o].*)?|gro([^u].*)?|grou([^p].*)?|group([^:].*)?",
    re.DOTALL,
)
_SERVICE_ACCOUNT = re.compile(r"system:serviceaccount:[^:\t\n\v\f\r ]+:[^:\t\n\v\f\r ]+")

NAME = Str(_DNS_SUBDOMAIN, "a lowercase DNS name (a-z, 0-9, '-', '.')", max_length=253)
CLASS = Str(_DNS_SUBDOMAIN, "a DeviceClass name (a-z, 0-9, '-', '.')", max_length=253)
NAMESPACE = Str(_DNS_LABEL, "a namespace name (a-z, 0-9, '-', at most 63 characters)")
TEXT = Str()
LABEL_VALUE = Str(noun="a string", empty=True)
ENFORCEMENT = OneOf(tuple(Action), Action)
"""A Tenant's or DeviceClassPolicy's rollout mode: Deny (the default), Warn or Audit."""


# --------------------------------------------------------------------------- shared pieces


def _operator_values(v: Mapping[str, Any], at: Path, report: Report) -> None:
    operator, values = v.get("operator"), v.get("values")
    if operator in ("In", "NotIn") and not values:
        report.add((*at, "values"), f"operator {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        report.add((*at, "values"), f"operator {operator} takes no values")


REQUIREMENT = Obj(
    {
        "key": TEXT,
        "operator": OneOf(("In", "NotIn", "Exists", "DoesNotExist")),
        "values": ListOf(LABEL_VALUE, "strings"),
    },
    required=("key", "operator"),
    check=_operator_values,
    rules=(
        Rule(
            "!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",
            "operator In and NotIn need at least one value",
        ),
        Rule(
            "!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values)"
            " || size(self.values) == 0",
            "operator Exists and DoesNotExist take no values",
        ),
    ),
    make=lambda v: LabelRequirement(v["key"], v["operator"], tuple(v.get("values", ()))),
)


def _not_everything(v: Mapping[str, Any], at: Path, report: Report) -> None:
    if not v.get("matchLabels") and not v.get("matchExpressions"):
        report.add(
            at, "an empty selector matches every namespace; add matchLabels or matchExpressions"
        )


SELECTOR = Obj(
    {
        "matchLabels": MapOf(LABEL_VALUE, "a mapping of label keys to strings"),
        "matchExpressions": ListOf(REQUIREMENT, "label requirements"),
    },
    check=_not_everything,
    rules=(
        Rule(
            "(has(self.matchLabels) && size(self.matchLabels) > 0)"
            " || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",
            "an empty selector matches every namespace; add matchLabels or matchExpressions",
        ),
    ),
    make=lambda v: LabelSelector(v.get("matchLabels", {}), tuple(v.get("matchExpressions", ()))),
)


def _frozen(values: Sequence[str] | None) -> frozenset[str] | None:
    return None if values is None else frozenset(values)


# --------------------------------------------------------------------------- Tenant


def _has_limit(v: Mapping[str, Any], at: Path, report: Report) -> None:
    if "maxDevices" not in v and "maxDevicesPerClaim" not in v:
        report.add(at, "a quota entry needs maxDevices, maxDevicesPerClaim or both")


QUOTA = Obj(
    {"deviceClassName": CLASS, "maxDevices": Int(0), "maxDevicesPerClaim": Int(0)},
    required=("deviceClassName",),
    check=_has_limit,
    rules=(
        Rule(
            "has(self.maxDevices) || has(self.maxDevicesPerClaim)",
            "a quota entry needs maxDevices, maxDevicesPerClaim or both",
        ),
    ),
    make=lambda v: QuotaLimit(
        v["deviceClassName"], v.get("maxDevices"), v.get("maxDevicesPerClaim")
    ),
)


def _has_namespaces(v: Mapping[str, Any], at: Path, report: Report) -> None:
    if not v.get("namespaces") and "namespaceSelector" not in v:
        report.add(at, "a tenant needs namespaces, a namespaceSelector or both")


TENANT = Obj(
    {
        "namespaces": ListOf(NAMESPACE, "namespace names"),
        "namespaceSelector": SELECTOR,
        "allowedDeviceClasses": ListOf(CLASS, "DeviceClass names"),
        "adminAccess": Bool(),
        "quota": ListOf(QUOTA, "quota entries", unique_by=("deviceClassName",)),
        "legacyMappingAction": OneOf(tuple(MappingAction), MappingAction),
        "enforcement": ENFORCEMENT,
    },
    check=_has_namespaces,
    rules=(
        Rule(
            "(has(self.namespaces) && size(self.namespaces) > 0) || has(self.namespaceSelector)",
            "a tenant needs namespaces, a namespaceSelector or both",
        ),
    ),
)


def _tenant(name: str, spec: Mapping[str, Any], source: Source) -> Tenant:
    return Tenant(
        name=name,
        namespaces=frozenset(spec.get("namespaces", ())),
        namespace_selector=spec.get("namespaceSelector"),
        allowed_device_classes=_frozen(spec.get("allowedDeviceClasses")),
        admin_access=spec.get("adminAccess", False),
        quota=tuple(spec.get("quota", ())),
        mapping_action=spec.get("legacyMappingAction"),
        source=source,
        enforcement=spec.get("enforcement", Action.DENY),
    )


# --------------------------------------------------------------------------- DeviceClassPolicy


@dataclass(frozen=True)
class WrittenValidation:
    """A validation as written: its `action` is None when it takes its policy's enforcement."""

    expression: Compiled
    message: str
    action: Action | None

    def resolved(self, enforcement: Action) -> Validation:
        action = self.action if self.action is not None else enforcement
        return Validation(self.expression.text, self.message, action, self.expression.program)


def _validation(v: Mapping[str, Any]) -> WrittenValidation:
    expression: Compiled = v["expression"]
    return WrittenValidation(expression, v.get("message", expression.text), v.get("action"))


VALIDATION = Obj(
    {
        "expression": Cel(VALIDATION_VARIABLES, types=validation_types, newer=needs_newer),
        "message": TEXT,
        "action": OneOf(tuple(Action), Action),
    },
    required=("expression",),
    make=_validation,
)

CLASS_POLICY = Obj(
    {
        "deviceClassNames": ListOf(CLASS, "DeviceClass names"),
        "maxCountPerRequest": Int(1),
        "allowAllocationModeAll": Bool(),
        "validations": ListOf(VALIDATION, "validations"),
        "failurePolicy": OneOf(tuple(FailurePolicy), FailurePolicy),
        "enforcement": ENFORCEMENT,
    },
)


def _class_policy(name: str, spec: Mapping[str, Any], source: Source) -> DeviceClassPolicy:
    enforcement = spec.get("enforcement", Action.DENY)
    return DeviceClassPolicy(
        name=name,
        device_class_names=frozenset(spec.get("deviceClassNames", ())),
        max_count_per_request=spec.get("maxCountPerRequest"),
        allow_allocation_mode_all=spec.get("allowAllocationModeAll", True),
        validations=tuple(v.resolved(enforcement) for v in spec.get("validations", ())),
        source=source,
        failure_policy=spec.get("failurePolicy", FailurePolicy.FAIL),
        enforcement=enforcement,
    )


# --------------------------------------------------------------------------- LegacyResourceMapping


def _one_name(v: Mapping[str, Any], at: Path, report: Report) -> None:
    if "resourceName" in v and "resourceNamePrefix" in v:
        report.add(at, "set resourceName or resourceNamePrefix, not both")
    elif "resourceName" not in v and "resourceNamePrefix" not in v:
        report.add(at, "set resourceName (exact) or resourceNamePrefix")


def _resource(v: Mapping[str, Any]) -> ResourceMapping:
    selector: Compiled | None = v.get("selector")
    return ResourceMapping(
        v["deviceClassName"],
        v.get("resourceName"),
        v.get("resourceNamePrefix"),
        selector.text if selector else None,
    )


RESOURCE = Obj(
    {
        "resourceName": TEXT,
        "resourceNamePrefix": TEXT,
        "deviceClassName": CLASS,
        "selector": Cel(SELECTOR_VARIABLES, sample=SAMPLE_SUFFIX),
    },
    required=("deviceClassName",),
    check=_one_name,
    rules=(
        Rule(
            "has(self.resourceName) != has(self.resourceNamePrefix)",
            "set resourceName (exact) or resourceNamePrefix, not both",
        ),
    ),
    make=_resource,
)

MAPPING = Obj(
    {
        "action": OneOf(tuple(MappingAction), MappingAction),
        "resources": ListOf(
            RESOURCE, "resource mappings", unique_by=("resourceName", "resourceNamePrefix")
        ),
    },
    required=("resources",),
)


def _mapping(name: str, spec: Mapping[str, Any], source: Source) -> LegacyResourceMapping:
    return LegacyResourceMapping(
        name, spec.get("action", MappingAction.AUTO), tuple(spec.get("resources", ())), source
    )


# --------------------------------------------------------------------------- Settings


SETTINGS = Obj(
    {
        "denyUnknownNamespaces": Bool(),
        "feasibility": OneOf((Action.DENY, Action.WARN), Action),
        "whenStateUnavailable": OneOf((Action.DENY, Action.WARN), Action),
        "adminAccessEditors": ListOf(
            Str(_EDITOR, 'a user name or "group:NAME"'), 'user names or "group:NAME"'
        ),
        "exemptNamespaces": ListOf(NAMESPACE, "namespace names"),
        "exemptServiceAccounts": ListOf(
            Str(_SERVICE_ACCOUNT, '"system:serviceaccount:NAMESPACE:NAME"'),
            "service account user names",
        ),
        "gangKinds": ListOf(OneOf(tuple(sorted(GANG_KINDS))), "workload kinds"),
    },
)


def _settings(_name: str, spec: Mapping[str, Any], _source: Source) -> Settings:
    return Settings(
        deny_unknown_namespaces=spec.get("denyUnknownNamespaces", False),
        feasibility=spec.get("feasibility"),
        when_state_unavailable=spec.get("whenStateUnavailable", Action.DENY),
        admin_access_editors=frozenset(spec.get("adminAccessEditors", ())),
        exempt_namespaces=frozenset(spec.get("exemptNamespaces", ())),
        exempt_service_accounts=frozenset(spec.get("exemptServiceAccounts", ())),
        gang_kinds=frozenset(spec.get("gangKinds", GANG_KINDS)),
    )


# --------------------------------------------------------------------------- documents


@dataclass(frozen=True)
class Kind:
    """One policy kind: the schema of a whole document and how its spec becomes a policy."""

    name: str
    document: Obj
    build: Callable[[str, Mapping[str, Any], Source], Any]


METADATA = Obj(
    {"name": NAME, "labels": MapOf(LABEL_VALUE), "annotations": MapOf(LABEL_VALUE)},
    required=("name",),
)


def _kind(
    name: str,
    spec: Obj,
    build: Callable[[str, Mapping[str, Any], Source], Any],
    spec_required: bool = True,
) -> Kind:
    fields: dict[str, Spec] = {
        "apiVersion": Anything(),
        "kind": Anything(),
        "metadata": METADATA,
        "spec": spec,
    }
    required = ("metadata", "spec") if spec_required else ("metadata",)
    return Kind(name, Obj(fields, required=required), build)


KINDS: Mapping[str, Kind] = {
    k.name: k
    for k in (
        _kind("Tenant", TENANT, _tenant),
        _kind("DeviceClassPolicy", CLASS_POLICY, _class_policy),
        _kind("LegacyResourceMapping", MAPPING, _mapping),
        _kind("Settings", SETTINGS, _settings, spec_required=False),
    )
}

HEADER = Obj(
    {"apiVersion": OneOf((API_VERSION,)), "kind": OneOf(tuple(KINDS))},
    required=("apiVersion", "kind"),
    open=True,
)
"""Read first, on its own, so a stray Deployment in a policy folder gets two clear lines."""
