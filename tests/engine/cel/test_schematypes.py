"""OpenAPI schema -> CEL types, case by case as k8s.io/apiserver/pkg/cel/common/schemas.go."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.engine.cel import CelCompileError, TypeEnvironment, compile_expression
from webhook.engine.cel.schematypes import escape, schema_type, unescape

ESCAPES = {
    "plain": ("spec", "spec"),
    "reserved-word": ("namespace", "__namespace__"),
    "reserved-in": ("in", "__in__"),
    "dash": ("x-y", "x__dash__y"),
    "dot-and-slash": ("a.b/c", "a__dot__b__slash__c"),
    "double-underscore": ("a__b", "a__underscores__b"),
    "leading-underscore": ("_x", "_x"),
    "leading-digit": ("1x", None),
    "space": ("a b", None),
}


@pytest.mark.parametrize(("name", "escaped"), ESCAPES.values(), ids=ESCAPES)
def test_property_names_escape_as_the_api_server_does(name: str, escaped: str | None) -> None:
    assert escape(name) == escaped
    if escaped is not None:
        assert unescape(escaped) == name


DEFINITIONS: dict[str, Any] = {
    "Root": {
        "type": "object",
        "properties": {
            "kind": {"type": "string"},
            "apiVersion": {"type": "string"},
            "metadata": {"$ref": "Meta"},
            "spec": {"$ref": "Spec"},
        },
    },
    "Meta": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "generateName": {"type": "string"},
            "namespace": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "created": {"type": "string", "format": "date-time"},
        },
    },
    "Spec": {
        "type": "object",
        "properties": {
            "replicas": {"type": "integer"},
            "ratio": {"type": "number"},
            "on": {"type": "boolean"},
            "data": {"type": "string", "format": "byte"},
            "wait": {"type": "string", "format": "duration"},
            "port": {"format": "int-or-string"},
            "quantity": {"$ref": "Quantity"},
            "limits": {"type": "object", "additionalProperties": {"$ref": "Quantity"}},
            "items": {"type": "array", "items": {"$ref": "Item"}},
            "self": {"$ref": "Spec"},
            "raw": {"type": "object"},
            "inner": {"x-kubernetes-embedded-resource": True, "type": "object"},
            "x-y": {"type": "string"},
        },
    },
    "Item": {"type": "object", "properties": {"name": {"type": "string"}}},
    "Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
}


def _environment() -> TypeEnvironment:
    kind, objects = schema_type(DEFINITIONS, "Root", "Root")
    return TypeEnvironment("Root", {"object": kind}, objects)


def _error(expression: str) -> str | None:
    try:
        compile_expression(expression, variables=["object"], types=(_environment(),))
    except CelCompileError as error:
        return error.message
    return None


CASES = {
    "string-field": ("object.metadata.name == 'a'", None),
    "misspelt-root-field": ("object.spek == 1", "undefined field 'spek'"),
    "misspelt-nested-field": ("object.metadata.nmae == 'a'", "undefined field 'nmae'"),
    "reserved-word-escaped": ("object.metadata.__namespace__ == 'a'", None),
    "reserved-word-unescaped": ("object.metadata.namespace == 'a'", None),
    "escaped-name-needs-escape": ("object.spec.x-y == 'a'", "undeclared reference to 'y'"),
    "dash-escaped": ("object.spec.x__dash__y == 'a'", None),
    "integer-is-int": ("object.spec.replicas > 1", None),
    "integer-is-not-string": (
        "object.spec.replicas == 'a'",
        "found no matching overload for '_==_' applied to '(int, string)'",
    ),
    "number-is-double": ("object.spec.ratio > 1.0", None),
    "boolean": ("object.spec.on", None),
    "byte-format-is-bytes": ("object.spec.data == b'x'", None),
    "duration-format": ("object.spec.wait > duration('1s')", None),
    "date-time-is-timestamp": ("object.metadata.created < timestamp('2030-01-01T00:00:00Z')", None),
    "int-or-string-is-dyn": ("object.spec.port == 80 || object.spec.port == 'http'", None),
    "untyped-schema-is-no-field": ("object.spec.quantity == 'x'", "undefined field 'quantity'"),
    "map-of-untyped-is-no-field": ("size(object.spec.limits) > 0", "undefined field 'limits'"),
    "map-by-index": ("object.metadata.labels['a'] == 'b'", None),
    "map-by-dot": ("object.metadata.labels.a == 'b'", None),
    "list-element-field": ("object.spec.items.all(i, i.name != '')", None),
    "list-element-misspelt": ("object.spec.items.all(i, i.nmae != '')", "undefined field 'nmae'"),
    "list-index": ("object.spec.items[0].name == 'a'", None),
    "recursion-is-an-empty-object": (
        "object.spec.self.replicas == 1",
        "undefined field 'replicas'",
    ),
    "object-without-properties": ("object.spec.raw.x == 1", "undefined field 'x'"),
    "embedded-resource-has-kind": ("object.spec.inner.kind == 'Pod'", None),
    "embedded-resource-has-name": ("object.spec.inner.metadata.name == 'p'", None),
    "has-defined": ("has(object.spec.replicas)", None),
    "has-misspelt": ("has(object.spec.replicaz)", "undefined field 'replicaz'"),
    "optional-misspelt": ("object.?spec.?replicaz.hasValue()", "undefined field 'replicaz'"),
    "object-is-nullable": ("object.spec != null", None),
    "string-is-not-nullable": (
        "object.metadata.name != null",
        "found no matching overload for '_!=_' applied to '(string, null_type)'",
    ),
    "object-not-indexable": ("object['spec'] == null", "found no matching overload"),
    "result-must-be-bool": ("object.metadata.name", "must evaluate to bool"),
}


@pytest.mark.parametrize(("expression", "error"), CASES.values(), ids=CASES)
def test_expressions_over_a_schema_typed_object(expression: str, error: str | None) -> None:
    found = _error(expression)
    assert (found is None) == (error is None), found
    if error is not None:
        assert found is not None and found.startswith(error)


def test_an_escaped_field_reads_the_property_at_run_time() -> None:
    program = compile_expression(
        "object.metadata.__namespace__ == 'a' && object.metadata.namespace == 'a' && "
        "object.spec.x__dash__y == 'b'",
        variables=["object"],
        types=(_environment(),),
    )
    value = {"metadata": {"namespace": "a"}, "spec": {"x-y": "b"}}
    assert program.evaluate({"object": value}).value is True


def test_a_root_without_metadata_gets_kind_api_version_and_names() -> None:
    _, objects = schema_type({"Bare": {"type": "object", "properties": {}}}, "Bare", "Bare")
    assert set(objects["Bare"]) == {"kind", "apiVersion", "metadata"}
    assert set(objects["Bare.metadata"]) == {"name", "generateName"}
