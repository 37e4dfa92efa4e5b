"""Conversion between plain Python data and celpy values, done once per request.

The engine converts an admission request's variables with `to_cel` once and hands the same
values to every program; `Program.evaluate` only converts a variable that is still plain.
Results go back through `to_plain` so that nothing outside this package sees a celtypes value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import celpy.celtypes as ct

from webhook.engine.cel.errors import NoSuchOverload

CEL_VALUE_TYPES: tuple[type, ...] = (
    ct.BoolType,
    ct.IntType,
    ct.UintType,
    ct.DoubleType,
    ct.StringType,
    ct.BytesType,
    ct.ListType,
    ct.MapType,
    ct.DurationType,
    ct.TimestampType,
    ct.TypeType,
    type(None),
)
"""Values that are already CEL values; library types (Quantity, Semver) register themselves."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def register_value_type(cls: type) -> None:
    """Let a library type (Quantity, Semver) pass `to_cel` untouched."""
    global CEL_VALUE_TYPES  # noqa: PLW0603 - a registry filled at import time only
    CEL_VALUE_TYPES = (*CEL_VALUE_TYPES, cls)


def _map_to_cel(value: Mapping[Any, Any]) -> ct.MapType:
    return ct.MapType({ct.StringType(str(k)): to_cel(v) for k, v in value.items()})


def _int_to_cel(value: int) -> Any:
    return ct.IntType(value) if _INT64_MIN <= value <= _INT64_MAX else ct.DoubleType(value)


_TO_CEL: tuple[tuple[Any, Any], ...] = (
    (bool, ct.BoolType),
    (int, _int_to_cel),
    (float, ct.DoubleType),
    (str, ct.StringType),
    (Mapping, _map_to_cel),
    (list | tuple | set | frozenset, lambda v: ct.ListType([to_cel(i) for i in v])),
    (bytes, ct.BytesType),
)
"""Order matters: bool before int (bool is an int subclass)."""


def to_cel(value: Any) -> Any:
    """Plain JSON-ish Python (dict/list/str/int/float/bool/None) to celtypes, recursively."""
    if isinstance(value, CEL_VALUE_TYPES):
        return value
    for kind, convert in _TO_CEL:
        if isinstance(value, kind):
            return convert(value)
    raise TypeError(f"cannot convert {type(value).__name__} to a CEL value")


_TO_PLAIN: tuple[tuple[Any, Any], ...] = (
    (ct.BoolType, bool),
    (ct.IntType | ct.UintType, int),
    (ct.DoubleType, float),
    (ct.StringType, str),
    (ct.BytesType, bytes),
    (Mapping, lambda v: {to_plain(k): to_plain(i) for k, i in v.items()}),
    (list, lambda v: [to_plain(i) for i in v]),
)


def to_plain(value: Any) -> Any:
    """A CEL result as plain Python; library types (Quantity, Semver) become their text."""
    if value is None or isinstance(value, bool):
        return value
    for kind, convert in _TO_PLAIN:
        if isinstance(value, kind):
            return convert(value)
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, ct.IntType | ct.UintType | ct.DoubleType | int | float) and not (
        isinstance(value, bool | ct.BoolType)
    )


def _number(value: Any) -> int | float:
    return float(value) if isinstance(value, float) else int(value)


def cel_equal(left: Any, right: Any) -> bool:
    """CEL heterogeneous equality as cel-go does it: numbers by value, other mixes are unequal."""
    if _is_number(left) and _is_number(right):
        return _number(left) == _number(right)  # Python compares int and float exactly
    try:
        return bool(left == right)
    except TypeError:
        return False


def expect(value: Any, kind: type | tuple[type, ...], function: str) -> Any:
    """The argument itself, or a CEL 'no such overload' error naming the function."""
    if not isinstance(value, kind):
        raise NoSuchOverload(f"no such overload: {function} applied to {type_name(value)}")
    return value


def type_name(value: Any) -> str:
    """The CEL type name of a value, for error messages."""
    names = {
        ct.BoolType: "bool",
        ct.IntType: "int",
        ct.UintType: "uint",
        ct.DoubleType: "double",
        ct.StringType: "string",
        ct.BytesType: "bytes",
        ct.ListType: "list",
        type(None): "null",
    }
    for cls, name in names.items():
        if isinstance(value, cls):
            return name
    if isinstance(value, Mapping):
        return "map"
    return getattr(type(value), "CEL_TYPE_NAME", type(value).__name__)


class DomainMap(ct.MapType):
    """`device.attributes` / `device.capacity`: an unknown domain reads as an empty map.

    This mirrors the DRA selector environment, where `device.attributes['other.example.com']`
    is `{}` rather than an error, so `'x' in device.attributes['d']` is always safe to write.
    """

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) and not dict.__contains__(self, key):
            return ct.MapType()
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key]
