"""The CustomResourceDefinitions of the policy kinds, made from the loader's own schema.

Tenant, DeviceClassPolicy, LegacyResourceMapping and Settings are the same YAML as files and as
objects (`kubectl apply -f policies/`): cluster-scoped, `dragate.io/v1alpha1`, with a status
subresource for what dragate reports back (conditions, and a Tenant's usage). The spec's schema
comes from `webhook.policy.openapi`; this module adds the names, printer columns and status.
The CRD files shipped in webhook/defaults/crds/ and charts/dragate/crds/ are `render`ed from
here (`dragate crds --write DIR`), and a test keeps them equal.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ruamel.yaml import YAML

from webhook.policy.kinds import KINDS, Kind
from webhook.policy.openapi import API_SERVER_FIELDS, Schema, crd_object, object_schema
from webhook.policy.reportcrds import REPORT_CRDS
from webhook.policy.schema import Obj
from webhook.types import API_VERSION

GROUP, VERSION = API_VERSION.split("/")


@dataclass(frozen=True)
class Column:
    """A `kubectl get` column; one showing a spec field appears only while the kind has it."""

    name: str
    json_path: str
    type: str = "string"
    spec_field: str | None = None


@dataclass(frozen=True)
class Shape:
    """What a kind's CRD adds to its schema: names, columns and its status fields."""

    plural: str
    singular: str
    short_names: tuple[str, ...]
    columns: tuple[Column, ...]
    status: Mapping[str, Schema]


_READY = Column("Ready", '.status.conditions[?(@.type=="Ready")].status')
_AGE = Column("Age", ".metadata.creationTimestamp", "date")
_ENFORCEMENT = Column("Enforcement", ".spec.enforcement", spec_field="enforcement")

CONDITIONS: Schema = {
    "type": "array",
    "description": "The latest observations of the policy's state (metav1.Condition).",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
    "items": {
        "type": "object",
        "required": ["type", "status", "lastTransitionTime", "reason", "message"],
        "properties": {
            "type": {
                "type": "string",
                "maxLength": 316,
                "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            },
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1024,
                "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            },
            "message": {"type": "string", "maxLength": 32768},
        },
    },
}
STATUS: Mapping[str, Schema] = {
    "observedGeneration": {
        "type": "integer",
        "format": "int64",
        "minimum": 0,
        "description": "The metadata.generation the status describes.",
    },
    "conditions": CONDITIONS,
}
USAGE: Mapping[str, Schema] = {
    "usage": {
        "type": "array",
        "description": "Devices the tenant holds per DeviceClass, and its quota.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["deviceClassName"],
        "items": {
            "type": "object",
            "required": ["deviceClassName", "used"],
            "properties": {
                "deviceClassName": {"type": "string"},
                "used": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 0},
            },
        },
    },
    "usageSummary": {
        "type": "string",
        "description": 'The usage in one line for `kubectl get`, e.g. "gpu.nvidia.com=3/4".',
    },
}

SHAPES: Mapping[str, Shape] = {
    "Tenant": Shape(
        "tenants", "tenant", ("tnt",),
        (Column("Namespaces", ".spec.namespaces"), Column("Usage", ".status.usageSummary"),
         _ENFORCEMENT, _READY, _AGE),
        {**STATUS, **USAGE},
    ),
    "DeviceClassPolicy": Shape(
        "deviceclasspolicies", "deviceclasspolicy", ("dcp",),
        (Column("Classes", ".spec.deviceClassNames"), _ENFORCEMENT, _READY, _AGE), STATUS,
    ),
    "LegacyResourceMapping": Shape(
        "legacyresourcemappings", "legacyresourcemapping", ("lrm",),
        (Column("Action", ".spec.action"), _READY, _AGE), STATUS,
    ),
    "Settings": Shape("settings", "settings", (), (_READY, _AGE), STATUS),
}  # fmt: skip
"""Every kind of KINDS needs one (a test says so): a new kind is a new CRD."""


def policy_crd(kind: Kind, shape: Shape) -> dict[str, Any]:
    """The CRD of one policy kind: its document schema with a status beside the spec."""
    status = {"type": "object", "properties": dict(shape.status)}
    made = object_schema(kind.document, {**API_SERVER_FIELDS, "status": status})
    required = [name for name in made.pop("required", ()) if name not in API_SERVER_FIELDS]
    made |= {"required": required} if required else {}
    schema = {"description": f"A dragate {kind.name} policy (docs/policy.md).", **made}
    spec = kind.document.fields["spec"]
    fields = spec.fields if isinstance(spec, Obj) else {}
    columns = [
        {"name": c.name, "type": c.type, "jsonPath": c.json_path}
        for c in shape.columns
        if c.spec_field is None or c.spec_field in fields
    ]
    version = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "additionalPrinterColumns": columns,
        "schema": {"openAPIV3Schema": schema},
    }
    names: dict[str, Any] = {"kind": kind.name, "listKind": f"{kind.name}List",
                             "plural": shape.plural, "singular": shape.singular}  # fmt: skip
    if shape.short_names:
        names["shortNames"] = list(shape.short_names)
    return crd_object(GROUP, "Cluster", names, [version])


def crd_files() -> dict[str, dict[str, Any]]:
    """Every CRD dragate generates, by the file name it ships as (`<plural>.yaml`)."""
    made = [policy_crd(kind, SHAPES[name]) for name, kind in KINDS.items()]
    return {f"{crd['spec']['names']['plural']}.yaml": crd for crd in [*made, *REPORT_CRDS]}


HEADER = (
    "# Generated by `dragate crds --write DIR` from webhook/policy (do not edit: change the\n"
    "# kinds and regenerate; tests/policy/test_crds.py fails while this file is stale).\n"
)


def render(crd: Mapping[str, Any]) -> str:
    """One CRD as the YAML file it ships as, keys in the order they were built."""
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    yaml.width = 4096  # a CEL rule stays on one line
    out = io.StringIO()
    yaml.dump(crd, out)
    return HEADER + out.getvalue()


HAND_WRITTEN = ("tenantusages.yaml",)
"""CRD files not made from a schema here: the quota ledger's (webhook/ledger/tenantusage.py)."""


def crd_texts() -> dict[str, str]:
    """Every CRD file dragate ships, by name, sorted: the generated ones rendered now and the
    hand-written ones as the package holds them (what `kubectl apply -f` of the folder gets)."""
    folder = resources.files("webhook").joinpath("defaults", "crds")
    texts = {name: render(crd) for name, crd in crd_files().items()}
    texts |= {name: folder.joinpath(name).read_text(encoding="utf-8") for name in HAND_WRITTEN}
    return dict(sorted(texts.items()))
