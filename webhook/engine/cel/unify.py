"""Overload resolution: which declared signature a call's argument types select; and the
element type the items of a list or map literal agree on (`fits`, `open_parameters`).

`dyn` matches every parameter (the value's type is only known when it runs), type
parameters bind on first use and must agree afterwards, as in cel-go's checker.
"""

from __future__ import annotations

from webhook.engine.cel.types import ANY, DYN, NULL, PARAMS, CelType, Overload, is_object

Bindings = dict[str, CelType]


def _bind(param: str, actual: CelType, bindings: Bindings) -> bool:
    bound = bindings.get(param)
    if bound is None or (bound in (DYN, ANY) and actual not in (DYN, ANY)):
        bindings[param] = actual
        return True
    return actual in (DYN, ANY) or unify(bound, actual, bindings)


def unify(param: CelType, actual: CelType, bindings: Bindings) -> bool:
    """Whether `actual` can be passed where `param` is declared (binding type parameters)."""
    if isinstance(param, str) and param in PARAMS:
        return _bind(param, actual, bindings)
    if actual in (DYN, ANY) or param in (DYN, ANY):
        return True
    if (param == NULL and is_object(actual)) or (actual == NULL and is_object(param)):
        return True  # cel-go's legacy nullability of struct types (`namespace == null`)
    if isinstance(param, tuple) and isinstance(actual, tuple):
        if param[0] == actual[0] == "type":
            return True  # cel-go: any type value is assignable to any other (`int == string`)
        return (
            len(param) == len(actual)
            and param[0] == actual[0]
            and all(unify(p, a, bindings) for p, a in zip(param[1:], actual[1:], strict=True))
        )
    return param == actual


def substitute(kind: CelType, bindings: Bindings) -> CelType:
    """The declared result type with its type parameters replaced (unbound ones are dyn)."""
    if isinstance(kind, tuple):
        return tuple(substitute(k, bindings) for k in kind)
    if kind in PARAMS:
        return bindings.get(kind, DYN)
    return kind


def resolve(
    overloads: list[Overload], receiver: CelType | None, args: list[CelType]
) -> CelType | None:
    """The result type of the matching overloads (dyn when they disagree), None when none does."""
    results: list[CelType] = []
    for declared_receiver, params, result in overloads:
        if (declared_receiver is None) != (receiver is None) or len(params) != len(args):
            continue
        bindings: Bindings = {}
        pairs = list(zip(params, args, strict=True))
        if declared_receiver is not None and receiver is not None:
            pairs.insert(0, (declared_receiver, receiver))
        if all(unify(p, a, bindings) for p, a in pairs):
            results.append(substitute(result, bindings))
    if not results:
        return None
    return results[0] if all(r == results[0] for r in results) else DYN


def open_parameters(kind: CelType) -> int:
    """How many type parameters are dyn (an empty literal's `[]` is `list(dyn)`)."""
    if not isinstance(kind, tuple):
        return 0
    return sum(1 if p == DYN else open_parameters(p) for p in kind[1:])


def fits(kind: CelType, reference: CelType) -> bool:
    """Same type, or the same but for dyn parameters: `[[], [1]]` is a `list(list(int))`."""
    if kind == reference:
        return True
    if not (isinstance(kind, tuple) and isinstance(reference, tuple)):
        return False
    same_shape = kind[0] == reference[0] and len(kind) == len(reference)
    return same_shape and all(
        DYN in (a, b) or fits(a, b) for a, b in zip(kind[1:], reference[1:], strict=True)
    )
