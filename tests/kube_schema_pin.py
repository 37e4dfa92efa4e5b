"""Pins the Kubernetes OpenAPI v3 schemas dragate types CEL rule variables with.

`compact(documents)` keeps, of the kube-apiserver's `/openapi/v3` documents, only what
Kubernetes' OpenAPI-to-CEL conversion reads (k8s.io/apiserver/pkg/cel/common/schemas.go and
openapi/resolver/refs.go): `type`, `format`, `properties`, `additionalProperties`, `items`,
the reference (`$ref`, or the first reference of `allOf`, which replaces the schema holding
it) and the `x-kubernetes-int-or-string` / `-embedded-resource` / `-preserve-unknown-fields`
extensions, for the definitions reachable from the kinds a DeviceClassPolicy rule sees.

    python3 -m tests.kube_schema_pin DIR MINOR   # DIR holds api__v1_openapi.json and
                                                # apis__resource.k8s.io__v1_openapi.json

DIR holds the two documents saved from a running API server of Kubernetes MINOR (e.g. 1.36):
`kubectl get --raw /openapi/v3/api/v1 > DIR/api__v1_openapi.json`, and the same for
`/openapi/v3/apis/resource.k8s.io/v1` (the Kubernetes source's `api/openapi-spec/v3` holds
the same documents).

writes `webhook/defaults/kube/schemas-MINOR.json`, one per supported minor
(`webhook.types.kubeversions.SUPPORTED`); `tests/e2e/test_rule_types.py` checks the pinned
file of the API server's minor equals what that server serves.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOTS = {
    "Pod": "io.k8s.api.core.v1.Pod",
    "Namespace": "io.k8s.api.core.v1.Namespace",
    "ResourceClaim": "io.k8s.api.resource.v1.ResourceClaim",
    "ResourceClaimTemplate": "io.k8s.api.resource.v1.ResourceClaimTemplate",
}
DOCUMENTS = {
    "api__v1_openapi.json": "/openapi/v3/api/v1",
    "apis__resource.k8s.io__v1_openapi.json": "/openapi/v3/apis/resource.k8s.io/v1",
}
PINNED_DIR = Path(__file__).resolve().parent.parent / "webhook" / "defaults" / "kube"
_PREFIX = "#/components/schemas/"
_EXTENSIONS = (
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-preserve-unknown-fields",
)


def _ref(schema: Mapping[str, Any]) -> str | None:
    """refs.go refOf: the schema's own $ref, else the first one found in allOf."""
    if "$ref" in schema:
        return str(schema["$ref"]).removeprefix(_PREFIX)
    for part in schema.get("allOf", ()):
        found = _ref(part)
        if found is not None:
            return found
    return None


def _compact(schema: Mapping[str, Any], wanted: list[str]) -> dict[str, Any]:
    ref = _ref(schema)
    if ref is not None:
        wanted.append(ref)
        return {"$ref": ref}
    kept: dict[str, Any] = {}
    kind = schema.get("type")
    if kind:
        kept["type"] = kind[0] if isinstance(kind, list) else kind
    if schema.get("format"):
        kept["format"] = schema["format"]
    if "properties" in schema:
        kept["properties"] = {
            name: _compact(prop, wanted) for name, prop in sorted(schema["properties"].items())
        }
    for key in ("additionalProperties", "items"):
        if isinstance(schema.get(key), Mapping):
            kept[key] = _compact(schema[key], wanted)
    kept.update({k: True for k in _EXTENSIONS if schema.get(k) is True})
    return kept


def compact(documents: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The pinned form of the served documents (only definitions the roots reach)."""
    schemas: dict[str, Any] = {}
    for document in documents:
        schemas.update(document["components"]["schemas"])
    definitions: dict[str, Any] = {}
    wanted = list(ROOTS.values())
    while wanted:
        name = wanted.pop()
        if name not in definitions:
            definitions[name] = _compact(schemas[name], wanted)
    return {"roots": ROOTS, "definitions": dict(sorted(definitions.items()))}


def dumps(pinned: Mapping[str, Any]) -> str:
    return json.dumps(pinned, sort_keys=True, separators=(",", ":")) + "\n"


def pinned_path(minor: str) -> Path:
    """Where the schemas of Kubernetes `minor` (`1.36`) are pinned."""
    return PINNED_DIR / f"schemas-{minor}.json"


def main(directory: str, minor: str) -> None:
    documents = [json.loads((Path(directory) / name).read_text()) for name in DOCUMENTS]
    pinned_path(minor).write_text(dumps(compact(documents)), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
