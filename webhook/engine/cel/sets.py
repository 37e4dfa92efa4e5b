"""cel-go `ext.Sets`: sets.contains, sets.equivalent, sets.intersects over lists.

Membership uses CEL heterogeneous equality, so `sets.contains([1], [1.0])` is true as in Go.
The calls are written `sets.contains(a, b)`; the transpiler rewrites that member call on the
identifier `sets` into a call of the global function named `sets.contains`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import celpy.celtypes as ct

from webhook.engine.cel.values import cel_equal, expect


def _has(items: list[Any], item: Any) -> bool:
    return any(cel_equal(candidate, item) for candidate in items)


def _lists(a: Any, b: Any, function: str) -> tuple[list[Any], list[Any]]:
    return expect(a, ct.ListType, function), expect(b, ct.ListType, function)


def contains(a: Any, b: Any) -> ct.BoolType:
    """Every element of `b` is in `a` (true for an empty `b`)."""
    left, right = _lists(a, b, "sets.contains")
    return ct.BoolType(all(_has(left, item) for item in right))


def equivalent(a: Any, b: Any) -> ct.BoolType:
    """Each list contains every element of the other; duplicates do not matter."""
    left, right = _lists(a, b, "sets.equivalent")
    return ct.BoolType(all(_has(left, i) for i in right) and all(_has(right, i) for i in left))


def intersects(a: Any, b: Any) -> ct.BoolType:
    """At least one element is in both lists."""
    left, right = _lists(a, b, "sets.intersects")
    return ct.BoolType(any(_has(left, item) for item in right))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sets.contains": contains,
    "sets.equivalent": equivalent,
    "sets.intersects": intersects,
}
