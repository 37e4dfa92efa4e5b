"""CEL types from a Kubernetes OpenAPI schema, as the API server derives them for `object`.

Follows k8s.io/apiserver/pkg/cel/common/schemas.go (`SchemaDeclType`) over a schema whose
references are resolved as openapi/resolver/refs.go does (a reference met again below itself
becomes an empty object): objects with `properties` become object types whose fields are the
properties (names escaped as `Escape` does: `namespace` is `__namespace__`, `a-b` is
`a__dash__b`), `additionalProperties` a `map(string, V)`, arrays a `list(E)`, `integer` int,
`number` double, `boolean` bool, strings by format (`byte` bytes, `duration`, `date` and
`date-time` timestamp) and int-or-string `dyn`. A schema without a type (a Quantity, whose
OpenAPI v3 form is a oneOf) has no CEL type, so the property holding it is no field at all,
exactly as in the API server. `x-kubernetes-preserve-unknown-fields` is ignored there too.
A reserved word names its escaped field as well (`find_field`).
The root (and every embedded resource) always has `apiVersion`, `kind` and
`metadata.name`/`generateName`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from webhook.engine.cel.types import (
    BOOL,
    BYTES,
    DOUBLE,
    DURATION,
    DYN,
    INT,
    STRING,
    TIMESTAMP,
    CelType,
    list_of,
    map_of,
    object_type,
)

Schema = Mapping[str, Any]
Objects = dict[str, dict[str, CelType]]

_RESERVED = frozenset(
    {
        *("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for"),
        *("function", "if", "import", "let", "loop", "package", "namespace", "return", "var"),
        *("void", "while"),
    }
)
_SIMPLE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_EXPAND = re.compile(r"__|[-./]")
_EXPANSIONS = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_STRING_FORMATS = {"byte": BYTES, "duration": DURATION, "date": TIMESTAMP, "date-time": TIMESTAMP}
_SCALARS = {"boolean": BOOL, "number": DOUBLE, "integer": INT}
_EMPTY_OBJECT: Schema = {"type": "object"}


def escape(name: str) -> str | None:
    """A property's CEL field name (apiserver/pkg/cel/escaping.go), None when it has none."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    if not re.fullmatch(r"[a-zA-Z0-9_\-./]+", name):
        return None
    if _SIMPLE.fullmatch(name) and "__" not in name:
        return name
    return _EXPAND.sub(lambda m: _EXPANSIONS[m.group(0)], name)


_UNEXPAND = re.compile(r"__([^_]+)__")
_UNEXPANSIONS = {"dash": "-", "dot": ".", "slash": "/", "underscores": "__"}


def unescape(field: str) -> str:
    """The property a field name stands for (escaping.go `Unescape`); itself if unescaped."""
    if field.startswith("__") and field.endswith("__") and field[2:-2] in _RESERVED:
        return field[2:-2]
    if "__" not in field:
        return field
    parts = _UNEXPAND.split(field)
    if any(parts[i] not in _UNEXPANSIONS for i in range(1, len(parts), 2)):
        return field
    return "".join(_UNEXPANSIONS[p] if i % 2 else p for i, p in enumerate(parts))


def find_field(fields: Mapping[str, CelType], name: str) -> CelType | None:
    """A field's type; a reserved word finds its escaped name too (`metadata.namespace` is
    `metadata.__namespace__`), as the API server's type provider does since Kubernetes 1.31."""
    found = fields.get(name)
    if found is None and name in _RESERVED:
        return fields.get(f"__{name}__")
    return found


class _Converter:
    def __init__(self, definitions: Mapping[str, Schema]) -> None:
        self.definitions = definitions
        self.objects: Objects = {}

    def resolve(self, schema: Schema, visited: frozenset[str]) -> tuple[Schema, frozenset[str]]:
        ref = schema.get("$ref")
        if ref is None:
            return schema, visited
        if ref in visited:
            return _EMPTY_OBJECT, visited
        return self.definitions[ref], visited | {ref}

    def convert(
        self, schema: Schema, path: str, visited: frozenset[str], root: bool = False
    ) -> CelType | None:
        schema, visited = self.resolve(schema, visited)
        if schema.get("format") == "int-or-string" or schema.get("x-kubernetes-int-or-string"):
            return DYN
        if root:
            schema = self._with_type_and_object_meta(schema, visited)
        kind = schema.get("type")
        if kind == "array":
            return self._array(schema, path, visited)
        if kind == "object":
            return self._object(schema, path, visited)
        if kind == "string":
            return _STRING_FORMATS.get(schema.get("format", ""), STRING)
        return _SCALARS.get(kind or "")

    def _array(self, schema: Schema, path: str, visited: frozenset[str]) -> CelType | None:
        items = schema.get("items")
        if items is None:
            return None
        element = self.convert(items, f"{path}.@idx", visited, _embedded(items))
        return None if element is None else list_of(element)

    def _object(self, schema: Schema, path: str, visited: frozenset[str]) -> CelType | None:
        values = schema.get("additionalProperties")
        if values is not None:
            value = self.convert(values, f"{path}.@elem", visited, _embedded(values))
            return None if value is None else map_of(STRING, value)
        fields: dict[str, CelType] = {}
        for name, prop in schema.get("properties", {}).items():
            kind = self.convert(prop, f"{path}.{name}", visited, _embedded(prop))
            escaped = escape(name)
            if kind is not None and escaped is not None:
                fields[escaped] = kind
        self.objects[path] = fields
        return object_type(path)

    def _with_type_and_object_meta(self, schema: Schema, visited: frozenset[str]) -> Schema:
        """schemas.go WithTypeAndObjectMeta: `kind`, `apiVersion`, `metadata.name` and
        `metadata.generateName` are always there at a resource's root."""
        props = schema.get("properties", {})
        metadata = self.resolve(props.get("metadata", {}), visited)[0]
        meta_props = metadata.get("properties", {})
        if (
            _is_string(self.resolve(props.get("kind", {}), visited)[0])
            and _is_string(self.resolve(props.get("apiVersion", {}), visited)[0])
            and metadata.get("type") == "object"
            and all(_is_string(self.resolve(meta_props.get(n, {}), visited)[0]) for n in _META)
        ):
            return schema
        meta = {"type": "object", "properties": {n: {"type": "string"} for n in _META}}
        added = {"kind": {"type": "string"}, "apiVersion": {"type": "string"}, "metadata": meta}
        return {**schema, "properties": {**props, **added}}


_META = ("name", "generateName")


def _is_string(schema: Schema) -> bool:
    return schema.get("type") == "string"


def _embedded(schema: Schema) -> bool:
    return bool(schema.get("x-kubernetes-embedded-resource"))


def schema_type(
    definitions: Mapping[str, Schema], root: str, name: str
) -> tuple[CelType, Mapping[str, Mapping[str, CelType]]]:
    """The CEL type of resource `root` (a definition name), its object types named from
    `name` (`Pod`, `Pod.spec`, `Pod.spec.containers.@idx`), and their fields."""
    converter = _Converter(definitions)
    kind = converter.convert({"$ref": root}, name, frozenset(), root=True)
    return (DYN if kind is None else kind), converter.objects
