"""Type checking of comprehensions: the macros (`all`, `exists`, `map`, `filter`...) and the
two-variable comprehensions, each checked with its bound variables in scope.

cel-go refuses a range that is neither a list, a map nor dyn, a predicate that is not a bool,
two variables of one name, and a variable named after the accumulator; so does this.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from celpy.evaluation import TranspilerTree

from webhook.engine.cel.comprehensions import TRANSFORMS
from webhook.engine.cel.syntax import compile_error, ident_name
from webhook.engine.cel.types import (
    ANY,
    BOOL,
    DYN,
    INT,
    SORT_KEY_TYPES,
    CelType,
    list_of,
    map_of,
    show,
)

Check = Callable[[Any, Mapping[str, CelType]], CelType]
"""The checker's `check(node, scope)`: a node's type with the variables of `scope` bound."""


def check_macro(
    check: Check,
    name: str,
    target: CelType,
    args: list[TranspilerTree],
    *,
    scope: Mapping[str, CelType],
    node: Any,
) -> CelType:
    """`target.name(x, ...)` for the one-variable macros."""
    element = range_element(target, node)
    inner = {**scope, str(ident_name(args[0])): element}
    bodies = [check(a, inner) for a in args[1:]]
    _require_predicates(args[1:], bodies if name != "map" else bodies[:-1])
    if name == "map":
        return list_of(bodies[-1])
    return list_of(element) if name == "filter" else BOOL


def check_two_variable(
    check: Check,
    name: str,
    target: CelType,
    args: list[TranspilerTree],
    *,
    scope: Mapping[str, CelType],
    node: Any,
) -> CelType:
    """`target.name(i, v, ...)`: index (or key) and element (or value) bound."""
    names = [str(ident_name(a)) for a in args[:2]]
    if names[0] == names[1]:
        raise compile_error(f"duplicate variable name: {names[0]}", args[1])
    if "__result__" in names:
        raise compile_error("iteration variable overwrites accumulator variable", node)
    element = range_element(target, node)
    first = INT if isinstance(target, tuple) and target[0] == "list" else element
    second = target[-1] if isinstance(target, tuple) else DYN
    kinds = [check(a, {**scope, names[0]: first, names[1]: second}) for a in args[2:]]
    _require_predicates(args[2:], kinds if name not in TRANSFORMS else kinds[:-1])
    if name == "transformList":
        return list_of(kinds[-1])
    if name == "transformMap":
        return map_of(first, kinds[-1])
    return kinds[-1] if name == "transformMapEntry" else BOOL


def check_sort_by(
    check: Check,
    target: CelType,
    args: list[TranspilerTree],
    *,
    scope: Mapping[str, CelType],
    node: Any,
) -> CelType:
    """`target.sortBy(e, key)` (cel-go ext lists): the list itself, ordered by a key that
    must be of a comparable type (or dyn, decided when it runs)."""
    element = range_element(target, node)
    key = check(args[1], {**scope, str(ident_name(args[0])): element})
    if key not in (*SORT_KEY_TYPES, DYN):
        shown = f"{show(list_of(element))}.(list({show(key)}))"
        raise compile_error(
            f"found no matching overload for '@sortByAssociatedKeys' applied to '{shown}'", node
        )
    return list_of(element)


def _require_predicates(args: list[TranspilerTree], kinds: list[CelType]) -> None:
    for arg, kind in zip(args, kinds, strict=False):
        if kind not in (BOOL, DYN, ANY):
            raise compile_error(f"expected type 'bool' but found '{show(kind)}'", arg)


def range_element(target: CelType, node: Any) -> CelType:
    """The type a comprehension binds its (first) variable to when ranging over `target`."""
    if isinstance(target, tuple) and target[0] in ("list", "map"):
        return target[1]
    if target == DYN:
        return DYN
    raise compile_error(
        f"expression of type '{show(target)}' cannot be range of a comprehension "
        "(must be list, map, or dynamic)",
        node,
    )
