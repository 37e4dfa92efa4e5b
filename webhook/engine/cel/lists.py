"""The Kubernetes `lists` library: isSorted, sum, min, max, indexOf, lastIndexOf.

Comparisons use CEL ordering (ints, uints and doubles compare across types by value, as
cel-go's cross-type numeric comparisons do); equality for indexOf is CEL heterogeneous
equality, so `[1, 2].indexOf(2.0)` is 1 in Go and here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from itertools import pairwise
from typing import Any

import celpy.celtypes as ct

from webhook.engine.cel.errors import CelFunctionError
from webhook.engine.cel.values import cel_equal, expect, type_name

_NUMBERS = (ct.IntType, ct.UintType, ct.DoubleType)


def _list(value: Any, function: str) -> list[Any]:
    return expect(value, ct.ListType, function)  # type: ignore[no-any-return]


def _key(value: Any) -> Any:
    """Ordering key: numbers compare by value whatever their CEL type, like cel-go."""
    if isinstance(value, _NUMBERS) and not isinstance(value, ct.BoolType):
        return float(value) if isinstance(value, ct.DoubleType) else int(value)
    return value


def _greater(left: Any, right: Any) -> bool:
    a, b = _key(left), _key(right)
    both_numbers = isinstance(a, int | float) and isinstance(b, int | float)
    if not both_numbers and type(left) is not type(right):
        raise CelFunctionError(
            f"no such overload: compare {type_name(left)} with {type_name(right)}"
        )
    return bool(a > b)


def is_sorted(receiver: Any) -> ct.BoolType:
    items = _list(receiver, "isSorted")
    return ct.BoolType(not any(_greater(a, b) for a, b in pairwise(items)))


def total(receiver: Any) -> Any:
    """`sum()`: 0 for an empty list (the int zero, as for a list of ints)."""
    items = _list(receiver, "sum")
    if not items:
        return ct.IntType(0)
    return reduce(lambda acc, item: acc + item, items[1:], items[0])


def _pick(receiver: Any, name: str, replaces: Any) -> Any:
    """Go's cmp(): keep the first best element, replace it only on a strict win."""
    items = _list(receiver, name)
    if not items:
        raise CelFunctionError(f"{name} called on empty list")
    best = items[0]
    for item in items[1:]:
        if replaces(best, item):
            best = item
    return best


def minimum(receiver: Any) -> Any:
    return _pick(receiver, "min", _greater)


def maximum(receiver: Any) -> Any:
    return _pick(receiver, "max", lambda best, item: _greater(item, best))


def list_index_of(receiver: Any, item: Any) -> ct.IntType:
    items = _list(receiver, "indexOf")
    return ct.IntType(next((i for i, v in enumerate(items) if cel_equal(v, item)), -1))


def list_last_index_of(receiver: Any, item: Any) -> ct.IntType:
    items = _list(receiver, "lastIndexOf")
    found = (i for i in range(len(items) - 1, -1, -1) if cel_equal(items[i], item))
    return ct.IntType(next(found, -1))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isSorted": is_sorted,
    "sum": total,
    "min": minimum,
    "max": maximum,
}
"""indexOf/lastIndexOf are shared with strings and dispatched in library.py."""
