"""CEL operators where celpy's Python semantics differ from cel-go's.

* `+` on strings, lists and bytes keeps the CEL type (Python's `list + list` is a plain list,
  which no library function accepts) and is charged to the evaluation budget.
* Ordering and equality across int, uint and double compare numeric values, as cel-go does
  for dynamic values; other mixed types are unequal, and a Kubernetes library type
  (Quantity, Semver...) compared with a different type is a "no such overload" error.
* List indexes are integers within bounds: `[1, 2][-1]` is an error, not Python's last item.
* `string(true)` is "true" and `string(double)` is Go's shortest 'g' format.

Relies on (checked with cel-python 0.5.0 and lark 1.3.1; canaries: tests/canary/test_celpy.py):
- `celpy.evaluation bool_*, operator_in, function_*`: the names transpiled code calls for
  comparisons, `in` and string tests, replaced in `EVALUATION_OVERRIDES`.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import celpy.celtypes as ct
import celpy.evaluation
from celpy.evaluation import CELEvalError

from webhook.engine.cel.budget import charge, size_units
from webhook.engine.cel.errors import CelFunctionError, NoSuchOverload
from webhook.engine.cel.values import type_name

_NUMBERS = (ct.IntType, ct.UintType, ct.DoubleType)
_CONCATENATED: tuple[tuple[type, type], ...] = (
    (ct.StringType, str),
    (ct.ListType, list),
    (ct.BytesType, bytes),
)
_PLAIN_CEL = (
    *_NUMBERS,
    ct.BoolType,
    ct.StringType,
    ct.BytesType,
    ct.ListType,
    ct.MapType,
    ct.DurationType,
    ct.TimestampType,
    type(None),
    type,
)


def _is_number(value: Any) -> bool:
    return isinstance(value, _NUMBERS) and not isinstance(value, ct.BoolType)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def make_int(value: Any) -> ct.IntType:
    """`IntType(value)` without celpy's per-call wrapper construction (the hot path)."""
    if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:
        return int.__new__(ct.IntType, value)
    return ct.IntType(value)


_GO_DURATION = re.compile(r"[-+]?(0|((\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)")


def make_duration(value: Any, *args: Any) -> ct.DurationType:
    """`duration(s)` accepting only what Go's time.ParseDuration does (celpy also takes 'd')."""
    if isinstance(value, str):
        if not _GO_DURATION.fullmatch(value):
            raise ValueError(f"invalid duration {value!r}")
        if value.lstrip("+-") == "0":
            return ct.DurationType(0)
        value = value.replace("\u00b5s", "us").replace("\u03bcs", "us")  # celpy knows only us
    return ct.DurationType(value, *args)


def _int_result(value: int) -> ct.IntType:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise CelFunctionError("integer overflow")
    return int.__new__(ct.IntType, value)


def _both_ints(left: Any, right: Any) -> bool:
    return type(left) is ct.IntType and type(right) is ct.IntType


def _int_arithmetic(name: str, fast: Callable[[int, int], int]) -> Callable[[Any, Any], Any]:
    slow = getattr(operator, name)

    def arithmetic(left: Any, right: Any) -> Any:
        charge(1)
        if _both_ints(left, right):
            return _int_result(fast(int(left), int(right)))
        return slow(left, right)

    return arithmetic


def add(left: Any, right: Any) -> Any:
    charge(1)
    if _both_ints(left, right):
        return _int_result(int(left) + int(right))
    for kind, python in _CONCATENATED:
        if isinstance(left, kind) and isinstance(right, kind):
            charge(size_units(left, right))
            return kind(python.__add__(left, right))  # type: ignore[operator]
    return operator.add(left, right)


def _numeric(value: Any) -> int | float:
    return float(value) if isinstance(value, ct.DoubleType) else int(value)


def _library_type(value: Any) -> bool:
    return not isinstance(value, _PLAIN_CEL) and hasattr(type(value), "CEL_TYPE_NAME")


def equal(left: Any, right: Any) -> bool:
    """cel-go's heterogeneous equality."""
    if _is_number(left) and _is_number(right):
        return _numeric(left) == _numeric(right)
    if _library_type(left) or _library_type(right):
        if type(left) is not type(right):
            raise NoSuchOverload(f"no such overload: _==_({type_name(left)}, {type_name(right)})")
        return bool(left == right)
    if isinstance(left, ct.ListType) and isinstance(right, ct.ListType):
        return len(left) == len(right) and all(map(equal, left, right))
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return _maps_equal(left, right)
    if type(left) is not type(right) and not (
        isinstance(left, type(right)) or isinstance(right, type(left))
    ):
        return False
    return bool(left == right)


def _maps_equal(left: Mapping[Any, Any], right: Mapping[Any, Any]) -> bool:
    if len(left) != len(right):
        return False
    for key, value in left.items():
        found = [v for k, v in right.items() if equal(k, key)]
        if not found or not equal(value, found[0]):
            return False
    return True


def _order(name: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    def ordered(left: Any, right: Any) -> Any:
        for value in (left, right):
            if isinstance(value, CELEvalError):
                return value
        if _is_number(left) and _is_number(right):
            return ct.BoolType(compare(_numeric(left), _numeric(right)))
        if type(left) is not type(right) or isinstance(left, ct.ListType | Mapping | type(None)):
            return CELEvalError(
                f"no such overload: {name}({type_name(left)}, {type_name(right)})", TypeError, ()
            )
        return ct.BoolType(compare(left, right))

    return ordered


def _equality(negate: bool) -> Callable[[Any, Any], Any]:
    def compared(left: Any, right: Any) -> Any:
        if isinstance(left, list | str) and isinstance(right, list | str):
            charge(size_units(left, right))
        for value in (left, right):
            if isinstance(value, CELEvalError):
                return value
        try:
            return ct.BoolType(equal(left, right) != negate)
        except NoSuchOverload as error:
            return CELEvalError(str(error), TypeError, ())

    return compared


def getitem(container: Any, index: Any) -> Any:
    """`container[index]`: list positions must be in range; map keys compare as CEL equality."""
    if isinstance(container, ct.ListType):
        if not isinstance(index, ct.IntType | ct.UintType) or isinstance(index, ct.BoolType):
            raise NoSuchOverload(f"no such overload: _[_](list, {type_name(index)})")
        if not 0 <= int(index) < len(container):
            raise CelFunctionError(f"index out of bounds: {int(index)}")
        return container[int(index)]
    if isinstance(container, Mapping) and _is_number(index) and index not in container:
        for key, value in container.items():
            if _is_number(key) and _numeric(key) == _numeric(index):
                return value
    return container[index]


def go_float_text(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 64): what cel-go's string(double) returns."""
    if math.isnan(value) or math.isinf(value) or value == 0:
        return _special_float(value)
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + int(exponent)
    prefix = "-" if sign else ""
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        power = point - 1
        return f"{prefix}{mantissa}e{'+' if power >= 0 else '-'}{abs(power):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return prefix + digits + "0" * (point - len(digits))
    return f"{prefix}{digits[:point]}.{digits[point:]}"


def _special_float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return "-0" if math.copysign(1, value) < 0 else "0"


def to_string(value: Any) -> ct.StringType:
    """CEL `string(x)`."""
    if isinstance(value, ct.BoolType):
        return ct.StringType("true" if value else "false")
    if isinstance(value, ct.DoubleType):
        return ct.StringType(go_float_text(float(value)))
    return ct.StringType(value)


OPERATOR = SimpleNamespace(
    **{
        **vars(operator),
        "add": add,
        "getitem": getitem,
        "sub": _int_arithmetic("sub", operator.sub),
        "mul": _int_arithmetic("mul", operator.mul),
    }
)
"""The `operator` module as transpiled code sees it."""


def _charged(function: Callable[..., Any]) -> Callable[..., Any]:
    """A celpy built-in (contains, startsWith, `in`...) charged by the size of what it scans."""

    def call(*args: Any) -> Any:
        charge(1 + size_units(*args))
        return function(*args)

    return call


_CHARGED_BUILTINS = (
    "function_contains",
    "function_startsWith",
    "function_endsWith",
    "function_matches",
    "operator_in",
)

EVALUATION_OVERRIDES: dict[str, Any] = {
    **{name: _charged(getattr(celpy.evaluation, name)) for name in _CHARGED_BUILTINS},
    "bool_lt": _order("_<_", operator.lt),
    "bool_le": _order("_<=_", operator.le),
    "bool_gt": _order("_>_", operator.gt),
    "bool_ge": _order("_>=_", operator.ge),
    "bool_eq": _equality(negate=False),
    "bool_ne": _equality(negate=True),
}
"""celpy.evaluation functions replaced for transpiled code."""
