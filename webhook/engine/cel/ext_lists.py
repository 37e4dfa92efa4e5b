"""cel-go's ext lists library, version 3: slice, flatten, sort, sortBy, distinct, reverse,
lists.range.

The API server offers it to new expressions from Kubernetes 1.35 on (its environment for new
expressions is that of the previous minor, and 1.34 added version 3). Values and error texts
follow cel-go; the budget is charged what cel-go's runtime cost tracker charges (the output
size, or twice the square of the size for sort and distinct), before the work is done, so
`lists.range(10000000)` stops on the budget instead of allocating.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from webhook.engine.cel.budget import charge
from webhook.engine.cel.errors import CelFunctionError
from webhook.engine.cel.values import cel_equal, expect, type_name

_ORDERED = (
    ct.BoolType,
    ct.IntType,
    ct.UintType,
    ct.DoubleType,
    ct.StringType,
    ct.BytesType,
    ct.DurationType,
    ct.TimestampType,
)
"""cel-go's comparable element types (traits.Comparer)."""


def _list(value: Any, function: str) -> list[Any]:
    return expect(value, ct.ListType, function)  # type: ignore[no-any-return]


def _int(value: Any, function: str) -> int:
    if isinstance(value, ct.BoolType) or not isinstance(value, ct.IntType):
        raise CelFunctionError(f"no such overload: {function} applied to {type_name(value)}")
    return int(value)


def lists_range(count: Any) -> ct.ListType:
    n = max(_int(count, "lists.range"), 0)
    charge(n)
    return ct.ListType([ct.IntType(i) for i in range(n)])


def reverse(receiver: Any) -> ct.ListType:
    items = _list(receiver, "reverse")
    charge(len(items))
    return ct.ListType(items[::-1])


def slice_list(receiver: Any, start: Any, end: Any) -> ct.ListType:
    items = _list(receiver, "slice")
    first, last = _int(start, "slice"), _int(end, "slice")
    where = f"cannot slice({first}, {last})"
    if first < 0 or last < 0:
        raise CelFunctionError(f"{where}, negative indexes not supported")
    if first > last:
        raise CelFunctionError(f"{where}, start index must be less than or equal to end index")
    if len(items) < last:
        raise CelFunctionError(f"{where}, list is length {len(items)}")
    charge(last - first)
    return ct.ListType(items[first:last])


def _flat(items: list[Any], depth: int) -> list[Any]:
    flat: list[Any] = []
    for item in items:
        if isinstance(item, ct.ListType) and depth > 0:
            flat.extend(_flat(item, depth - 1))
        else:
            flat.append(item)
    return flat


def flatten(receiver: Any, depth: Any = None) -> ct.ListType:
    items = _list(receiver, "flatten")
    levels = 1 if depth is None else _int(depth, "flatten")
    if levels < 0:
        raise CelFunctionError("level must be non-negative")
    charge(len(items) * levels)
    return ct.ListType(_flat(items, levels))


def _charge_self_compare(items: list[Any]) -> None:
    factor = 2.1 if items and isinstance(items[0], ct.StringType | ct.BytesType) else 2.0
    charge(int(len(items) * len(items) * factor))


def distinct(receiver: Any) -> ct.ListType:
    items = _list(receiver, "distinct")
    _charge_self_compare(items)
    unique: list[Any] = []
    for item in items:
        if not any(cel_equal(item, seen) for seen in unique):
            unique.append(item)
    return ct.ListType(unique)


def sort_by_keys(items: list[Any], keys: list[Any]) -> ct.ListType:
    """cel-go's @sortByAssociatedKeys: keys of one comparable type; ties keep their order."""
    _charge_self_compare(keys)
    if not keys:
        return ct.ListType(items)
    first = keys[0]
    if not isinstance(first, _ORDERED):
        raise CelFunctionError("list elements must be comparable")
    if len(keys) > 1 and any(type(key) is not type(first) for key in keys):
        raise CelFunctionError("list elements must have the same type")
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return ct.ListType([items[i] for i in order])


def sort(receiver: Any) -> ct.ListType:
    items = _list(receiver, "sort")
    return sort_by_keys(items, items)


def sort_by(
    activation: Any,
    target: Any,
    variable: str,
    key: Callable[[Any], Any],
    result: Callable[[Any, Callable[[Any], Any]], Any],
) -> Any:
    """`target.sortBy(variable, key)`: the list ordered by each element's key."""
    if isinstance(target, CELEvalError):
        return target
    items = _list(target, "sortBy")
    keys = []
    for item in items:
        found = result(activation.nested_activation(vars={variable: item}), key)
        if isinstance(found, CELEvalError):
            return found
        keys.append(found)
    return sort_by_keys(items, keys)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "lists.range": lists_range,
    "reverse": reverse,
    "slice": slice_list,
    "flatten": flatten,
    "distinct": distinct,
    "sort": sort,
}
"""sortBy is a macro (transpile.py binds its key expression), so it is not in this table."""
