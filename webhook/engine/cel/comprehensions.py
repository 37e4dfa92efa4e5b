"""Two-variable comprehensions (cel-go ext TwoVarComprehensions, in Kubernetes' environment).

`list.all(i, v, p)` binds the index and the element, `map.all(k, v, p)` the key and the value;
`exists`, `existsOne`, `transformList`, `transformMap` and `transformMapEntry` follow the same
pattern. Errors follow CEL's logic: `all` is false if any step is false even when another
step failed, and an error is the answer only when no step decided it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from webhook.engine.cel.errors import CelFunctionError, NoSuchOverload

Body = Callable[[Any], Any]

TWO_VARIABLE_MACROS = frozenset(
    {
        "all",
        "exists",
        "existsOne",
        "exists_one",
        "transformList",
        "transformMap",
        "transformMapEntry",
    }
)
TRANSFORMS = frozenset({"transformList", "transformMap", "transformMapEntry"})


def _pairs(target: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(target, ct.ListType):
        return ((ct.IntType(i), v) for i, v in enumerate(target))
    if isinstance(target, Mapping):
        return iter(list(target.items()))
    raise NoSuchOverload("no such overload: comprehension over a value that is not a list or map")


def _quantify(macro: str, results: list[Any]) -> Any:
    errors = [r for r in results if isinstance(r, CELEvalError)]
    truths = [bool(r) for r in results if not isinstance(r, CELEvalError)]
    if macro == "all" and not all(truths):
        return ct.BoolType(False)
    if macro == "exists" and any(truths):
        return ct.BoolType(True)
    if errors:
        return errors[0]
    return ct.BoolType(
        macro == "all" if macro not in ("existsOne", "exists_one") else sum(truths) == 1
    )


def _transform(macro: str, target: Any, kept: list[tuple[Any, Any, Any]]) -> Any:
    for _, _, value in kept:
        if isinstance(value, CELEvalError):
            return value
    if macro == "transformList":
        return ct.ListType([value for _, _, value in kept])
    if macro == "transformMap":
        return ct.MapType({key: value for key, _, value in kept})
    merged: dict[Any, Any] = {}
    for _, _, entry in kept:
        for key, value in entry.items():
            if key in merged:
                raise CelFunctionError(f"insert failed: key {key} already exists")
            merged[key] = value
    return ct.MapType(merged)


def comprehend(
    activation: Any,
    macro: str,
    target: Any,
    *,
    names: tuple[str, str],
    keep: Body | None,
    body: Body,
    result: Callable[[Any, Body], Any],
) -> Any:
    """Run one two-variable comprehension; `result` is the evaluator's error trap."""
    if isinstance(target, CELEvalError):
        return target
    outcomes: list[tuple[Any, Any, Any]] = []
    for first, second in _pairs(target):
        scope = activation.nested_activation(vars={names[0]: first, names[1]: second})
        if keep is not None:
            decided = result(scope, keep)
            if isinstance(decided, CELEvalError):
                return decided
            if not decided:
                continue
        outcomes.append((first, second, result(scope, body)))
    if macro in TRANSFORMS:
        return _transform(macro, target, outcomes)
    return _quantify(macro, [value for _, _, value in outcomes])
