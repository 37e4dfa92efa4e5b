"""PolicyReport and ClusterPolicyReport (wgpolicyk8s.io/v1alpha2): the reports dragate writes.

The Kubernetes Policy WG defines the format and Kyverno writes it; Policy Reporter (a UI,
metrics and alerts) reads it. dragate writes the same format so those tools show its results
too. The schema follows the WG's published v1alpha2 CRD field for field (names, types, the
result and severity words, the required `policy` and timestamp parts) and marks references
and selectors atomic as Kyverno's copy does, so reports Kyverno writes and reports dragate
writes live under one CRD, whichever tool installed it. Only v1alpha2 is served here, as
Kyverno serves it.
"""

from __future__ import annotations

from typing import Any

from webhook.policy.openapi import Schema, crd_object

GROUP, VERSION = "wgpolicyk8s.io", "v1alpha2"
RESULTS = ["pass", "fail", "warn", "error", "skip"]
SEVERITIES = ["critical", "high", "low", "medium", "info"]

_STRING: Schema = {"type": "string"}
OBJECT_REFERENCE: Schema = {
    "type": "object",
    "description": "The object a result (or the whole report) is about.",
    "properties": dict.fromkeys(
        ("apiVersion", "kind", "namespace", "name", "uid", "resourceVersion", "fieldPath"),
        _STRING,
    ),
    "x-kubernetes-map-type": "atomic",
}
LABEL_SELECTOR: Schema = {
    "type": "object",
    "description": "Objects chosen by labels, instead of by reference.",
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": _STRING},
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {
                    "key": _STRING,
                    "operator": _STRING,
                    "values": {
                        "type": "array",
                        "items": _STRING,
                        "x-kubernetes-list-type": "atomic",
                    },
                },
            },
            "x-kubernetes-list-type": "atomic",
        },
    },
    "x-kubernetes-map-type": "atomic",
}
RESULT: Schema = {
    "type": "object",
    "required": ["policy"],
    "properties": {
        "policy": {"type": "string", "description": "The policy's name."},
        "rule": {"type": "string", "description": "The rule of the policy, if it has rules."},
        "result": {"type": "string", "enum": RESULTS},
        "message": _STRING,
        "severity": {"type": "string", "enum": SEVERITIES},
        "category": _STRING,
        "source": {"type": "string", "description": "The engine that wrote the result."},
        "scored": {"type": "boolean"},
        "timestamp": {
            "type": "object",
            "required": ["seconds", "nanos"],
            "properties": {
                "seconds": {"type": "integer", "format": "int64"},
                "nanos": {"type": "integer", "format": "int32"},
            },
        },
        "resources": {"type": "array", "items": OBJECT_REFERENCE},
        "resourceSelector": LABEL_SELECTOR,
        "properties": {
            "type": "object",
            "description": "Extra facts as strings (numbers, limits).",
            "additionalProperties": _STRING,
        },
    },
}
SUMMARY: Schema = {
    "type": "object",
    "description": "How many results of each kind the report holds.",
    "properties": {name: {"type": "integer"} for name in RESULTS},
}
COLUMNS = [
    *({"name": name, "type": "string", "jsonPath": f".scope.{field}"}
      for name, field in (("Kind", "kind"), ("Name", "name"))),
    *({"name": result.capitalize(), "type": "integer", "jsonPath": f".summary.{result}"}
      for result in RESULTS),
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]  # fmt: skip


def report_crd(kind: str, scope: str, short_name: str) -> dict[str, Any]:
    schema: Schema = {
        "type": "object",
        "description": f"{kind}: results of policies on objects (the Policy WG's format).",
        "properties": {
            "apiVersion": _STRING,
            "kind": _STRING,
            "metadata": {"type": "object"},
            "scope": OBJECT_REFERENCE,
            "scopeSelector": LABEL_SELECTOR,
            "summary": SUMMARY,
            "results": {"type": "array", "items": RESULT},
        },
    }
    version = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "additionalPrinterColumns": COLUMNS,
        "schema": {"openAPIV3Schema": schema},
    }
    plural = f"{kind.lower()}s"
    names = {"kind": kind, "listKind": f"{kind}List", "plural": plural,
             "singular": kind.lower(), "shortNames": [short_name]}  # fmt: skip
    return crd_object(GROUP, scope, names, [version])


REPORT_CRDS = (
    report_crd("PolicyReport", "Namespaced", "polr"),
    report_crd("ClusterPolicyReport", "Cluster", "cpolr"),
)
