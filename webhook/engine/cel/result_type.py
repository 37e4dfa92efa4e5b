"""A small, conservative static result-type check: reject expressions that can never be bool.

Kubernetes type-checks a validation or selector and refuses one whose type is not bool.
Without a full type checker we classify only what the syntax makes certain (`1 + 2`, `'x'`,
`size(x)`, `a.compareTo(b)`) and let everything else through (`request.count` may be
anything until it runs; the evaluator then reports a non-bool value to the caller).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from celpy.evaluation import TranspilerTree

from webhook.engine.cel.errors import CelCompileError
from webhook.engine.cel.syntax import call_parts, column, ident_name, namespace_of, subtrees

Kind = Literal["bool", "other"] | None

BOOL_RESULTS = frozenset(
    {
        "has",
        "bool",
        "isQuantity",
        "isSemver",
        "matches",
        "startsWith",
        "endsWith",
        "contains",
        "isGreaterThan",
        "isLessThan",
        "isSorted",
        "isInteger",
        "all",
        "exists",
        "exists_one",
        "sets.contains",
        "sets.equivalent",
        "sets.intersects",
    }
)
OTHER_RESULTS = frozenset(
    {
        "size",
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "duration",
        "timestamp",
        "type",
        "quantity",
        "semver",
        "compareTo",
        "sign",
        "asInteger",
        "asApproximateFloat",
        "add",
        "sub",
        "major",
        "minor",
        "patch",
        "charAt",
        "indexOf",
        "lastIndexOf",
        "lowerAscii",
        "upperAscii",
        "replace",
        "split",
        "substring",
        "trim",
        "join",
        "find",
        "findAll",
        "map",
        "filter",
        "strings.quote",
        "list",
    }
)
_PASS_THROUGH = frozenset(
    {
        "expr",
        "conditionalor",
        "conditionaland",
        "relation",
        "addition",
        "multiplication",
        "unary",
        "member",
        "primary",
        "paren_expr",
    }
)


def _by_name(name: str) -> Kind:
    if name in BOOL_RESULTS:
        return "bool"
    return "other" if name in OTHER_RESULTS else None


def _call_kind(node: TranspilerTree, variables: frozenset[str]) -> Kind:
    receiver, name, args = call_parts(node)
    namespace = namespace_of(receiver, variables)
    if namespace == "cel" and name == "bind" and args:
        return result_kind(args[-1], variables)
    return _by_name(f"{namespace}.{name}" if namespace else name)


def _ternary(node: TranspilerTree, variables: frozenset[str]) -> Kind:
    kinds = {result_kind(branch, variables) for branch in subtrees(node)[1:]}
    return "other" if kinds == {"other"} else None


_FIXED: dict[str, Kind] = {
    "conditionalor": "bool",
    "conditionaland": "bool",
    "relation": "bool",
    "addition": "other",
    "multiplication": "other",
    "list_lit": "other",
    "map_lit": "other",
}
"""Node types whose result kind does not depend on their operands (when they have two)."""


def _literal(node: TranspilerTree) -> Kind:
    return "bool" if node.children[0].type == "BOOL_LIT" else "other"  # type: ignore[union-attr]


def _unary(node: TranspilerTree) -> Kind:
    return "bool" if subtrees(node)[0].data == "unary_not" else "other"


def result_kind(node: TranspilerTree, variables: frozenset[str]) -> Kind:
    """'bool' or 'other' when the syntax settles it, None when only evaluation can tell."""
    children, data = node.children, node.data
    if len(children) == 1 and data in _PASS_THROUGH:
        return result_kind(children[0], variables)  # type: ignore[arg-type]
    if data in _FIXED:
        return _FIXED[data]
    handlers: dict[str, Callable[[], Kind]] = {
        "unary": lambda: _unary(node),
        "expr": lambda: _ternary(node, variables),
        "literal": lambda: _literal(node),
        "ident_arg": lambda: _by_name(str(children[0])),
        "member_dot_arg": lambda: _call_kind(node, variables),
    }
    handler = handlers.get(data)
    return handler() if handler else None


def require_bool(tree: TranspilerTree, variables: frozenset[str]) -> None:
    """CelCompileError when the expression's value is statically not a bool."""
    if result_kind(tree, variables) == "other":
        shown = ident_name(tree) or "this expression"
        raise CelCompileError(
            f"{shown} must evaluate to a bool, but its result is never a bool", column(tree) or 1
        )
