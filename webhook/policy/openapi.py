"""The loader's specs as OpenAPI v3 structural schemas: the CRDs' validation, never written twice.

`webhook.policy.kinds` states each policy kind once, as specs the loader reads files with. The
CRDs that make the same kinds Kubernetes objects take their `openAPIV3Schema` from here, so a
field added to a kind reaches the API server when the CRD files are regenerated
(`dragate crds --write DIR`), and tests/policy/test_crds.py fails until they are.

What maps to what: a string with a pattern becomes `pattern` anchored at both ends (the
loader matches the whole string; the patterns are written in the syntax Python and RE2 share),
a minimum becomes `minimum`, a word list `enum`, a list of strings a `set` (the loader refuses
a repeated string in any list), a list of mappings unique by one required field a `map` keyed
by it, and an object's cross-field `rules` become `x-kubernetes-validations`. What the API
server cannot judge alone stays with the loader: CEL that must compile, uniqueness by a field
not every item has, and the rules across documents (docs/policy.md, "As objects").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from webhook.policy.celspec import Cel
from webhook.policy.schema import Bool, Int, ListOf, MapOf, Obj, OneOf, Spec, Str

Schema = dict[str, Any]

API_SERVER_FIELDS: Mapping[str, Schema] = {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"type": "object"},
}
"""Fields the API server owns: it checks them (a name must be a DNS subdomain) before ours."""


def schema_of(spec: Spec) -> Schema:
    """The structural schema accepting what `spec.read` accepts, as far as OpenAPI can say."""
    make = _MAKERS.get(type(spec))
    if make is None:
        name = type(spec).__name__
        raise TypeError(f"no OpenAPI schema for {name}: teach webhook/policy/openapi.py")
    return make(spec)


def object_schema(spec: Obj, extra: Mapping[str, Schema] | None = None) -> Schema:
    """An object's properties, required fields and CEL rules; `extra` adds fields the loader
    does not read (status) and replaces the API server's own (apiVersion, kind, metadata)."""
    extra = extra or {}
    properties = {
        name: extra.get(name) or schema_of(field) for name, field in spec.fields.items()
    } | dict(extra)
    schema: Schema = {"type": "object", "properties": properties}
    if spec.required:
        schema["required"] = list(spec.required)
    if spec.rules:
        schema["x-kubernetes-validations"] = [
            {"rule": rule.expression, "message": rule.message} for rule in spec.rules
        ]
    return schema


def anchored(pattern: re.Pattern[str]) -> str:
    """The pattern as RE2 reads it, matching whole strings as `fullmatch` does."""
    flags = "(?s)" if pattern.flags & re.DOTALL else ""
    return f"{flags}^(?:{pattern.pattern})$"


def _string(spec: Str) -> Schema:
    schema: Schema = {"type": "string"}
    if not spec.empty:
        schema["minLength"] = 1
    if spec.max_length is not None:
        schema["maxLength"] = spec.max_length
    if spec.pattern is not None:
        schema["pattern"] = anchored(spec.pattern)
        schema["description"] = spec.noun
    return schema


def _list(spec: ListOf) -> Schema:
    schema: Schema = {"type": "array", "items": schema_of(spec.item)}
    key = _map_key(spec)
    if isinstance(spec.item, Str | OneOf | Cel):
        schema["x-kubernetes-list-type"] = "set"
    elif key is not None:
        schema["x-kubernetes-list-type"] = "map"
        schema["x-kubernetes-list-map-keys"] = [key]
    else:
        schema["x-kubernetes-list-type"] = "atomic"
    return schema


def _map_key(spec: ListOf) -> str | None:
    """The one field items are unique by, when every item must have it (a list-map key)."""
    if not isinstance(spec.item, Obj) or len(spec.unique_by) != 1:
        return None
    [key] = spec.unique_by
    return key if key in spec.item.required else None


def crd_object(
    group: str, scope: str, names: Mapping[str, Any], versions: list[Schema]
) -> dict[str, Any]:
    """A CustomResourceDefinition (apiextensions.k8s.io/v1) around versions already made."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{names['plural']}.{group}"},
        "spec": {"group": group, "scope": scope, "names": dict(names), "versions": versions},
    }


_MAKERS: Mapping[type, Callable[[Any], Schema]] = {
    Obj: object_schema,
    ListOf: _list,
    MapOf: lambda spec: {"type": "object", "additionalProperties": schema_of(spec.value)},
    Str: _string,
    Cel: lambda spec: {"type": "string", "minLength": 1, "description": spec.noun},
    Int: lambda spec: {"type": "integer", "minimum": spec.minimum},
    Bool: lambda _: {"type": "boolean"},
    OneOf: lambda spec: {"type": "string", "enum": [str(choice) for choice in spec.choices]},
}
