"""CEL optional values (cel-go `OptionalTypes`, offered by Kubernetes since 1.29).

`x.?f` is "f if x has it", `m[?k]` is "m[k] if present", both giving an optional; the
library is `optional.of/none/ofNonZeroValue` and the methods `hasValue`, `value`, `orValue`
and `or`. celpy's grammar has no `.?` / `[?`, so `rewrite_optional_syntax` turns them into
calls of `_dg_optsel` / `_dg_optindex` before parsing (outside string literals only).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import celpy.celtypes as ct

from webhook.engine.cel.errors import CelFunctionError, NoSuchOverload
from webhook.engine.cel.values import register_value_type, type_name


class Optional:
    """An optional CEL value: `present` with `value`, or empty."""

    CEL_TYPE_NAME = "optional_type"
    __slots__ = ("present", "value")

    def __init__(self, value: Any = None, present: bool = False) -> None:
        self.value, self.present = value, present

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Optional):
            return NotImplemented
        return self.present == other.present and (not self.present or self.value == other.value)

    def __hash__(self) -> int:
        return hash((self.present, self.value if self.present else None))

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


register_value_type(Optional)
NONE = Optional()


def _optional(value: Any, function: str) -> Optional:
    if not isinstance(value, Optional):
        raise NoSuchOverload(f"no such overload: {function} applied to {type_name(value)}")
    return value


def select(receiver: Any, key: Any) -> Optional:
    """`receiver.?key` / `receiver[?key]`: the entry when present, else optional.none()."""
    if isinstance(receiver, Optional):
        if not receiver.present:
            return NONE
        receiver = receiver.value
    if isinstance(receiver, ct.ListType):
        index = int(key)
        return Optional(receiver[index], True) if 0 <= index < len(receiver) else NONE
    if not isinstance(receiver, Mapping):
        raise NoSuchOverload(f"no such overload: _?._ applied to {type_name(receiver)}")
    return Optional(receiver[key], True) if dict.__contains__(receiver, key) else NONE


_EMPTY_WHEN_ZERO = (
    ct.BoolType,
    ct.IntType,
    ct.UintType,
    ct.DoubleType,
    ct.StringType,
    ct.BytesType,
    ct.ListType,
    ct.MapType,
    ct.DurationType,
)
_ZERO_TIME = ct.TimestampType(datetime(1, 1, 1, tzinfo=UTC))


def _zero(value: Any) -> bool:
    """The zero value of its type: null, 0, '', [], {}, false, 0s, 0001-01-01T00:00:00Z."""
    if value is None:
        return True
    if isinstance(value, ct.TimestampType):
        return bool(value == _ZERO_TIME)
    return isinstance(value, _EMPTY_WHEN_ZERO) and not value


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "_dg_optsel": select,
    "_dg_optindex": select,
    "optional.of": lambda value: Optional(value, True),
    "optional.none": lambda: NONE,
    "optional.ofNonZeroValue": lambda value: NONE if _zero(value) else Optional(value, True),
    "hasValue": lambda o: ct.BoolType(_optional(o, "hasValue").present),
    "value": lambda o: _value(_optional(o, "value")),
    "orValue": lambda o, default: o.value if _optional(o, "orValue").present else default,
    "or": lambda o, other: o if _optional(o, "or").present else _optional(other, "or"),
}


def _value(optional: Optional) -> Any:
    if not optional.present:
        raise CelFunctionError("optional.none() dereference")
    return optional.value


_TOKENS = re.compile(
    r"""(?P<string>[rRbB]{0,2}("{3}[\s\S]*?"{3}|'{3}[\s\S]*?'{3}|"(\\.|[^"\\])*"|'(\\.|[^'\\])*'))"""
    r"""|(?P<select>\.\?\s*(?P<name>[_a-zA-Z][_a-zA-Z0-9]*))|(?P<index>\[\?)"""
)


def rewrite_optional_syntax(source: str) -> str:
    """`a.?b` -> `a._dg_optsel('b')`, `a[?k]` -> `a._dg_optindex(k)`; strings untouched."""
    if ".?" not in source and "[?" not in source:
        return source
    out: list[str] = []
    brackets: list[bool] = []  # open brackets, innermost last: True for an optional index
    at = 0
    for match in _TOKENS.finditer(source):
        out.append(_brackets(source[at : match.start()], brackets))
        at = match.end()
        if match.group("string"):
            out.append(match.group(0))
        elif match.group("select"):
            out.append(f"._dg_optsel('{match.group('name')}')")
        else:
            out.append("._dg_optindex(")
            brackets.append(True)
    out.append(_brackets(source[at:], brackets))
    return "".join(out)


def _brackets(text: str, brackets: list[bool]) -> str:
    """Plain text between tokens: the `]` closing an optional index becomes `)`."""
    result = []
    for char in text:
        if char == "[":
            brackets.append(False)
        elif char == "]" and brackets and brackets.pop():
            char = ")"  # noqa: PLW2901 - the closing bracket of an optional index
        result.append(char)
    return "".join(result)
