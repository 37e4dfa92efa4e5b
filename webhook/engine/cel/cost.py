"""A static worst-case cost estimate, close to cel-go's, for the create-time cost limit.

The API server refuses a DRA selector whose estimated cost exceeds 1,000,000 ("too complex,
exceeds cost limit"), before any device is seen. The estimate charges one unit per call,
operator, selection and index, ten per list literal and thirty per map literal, one per
element `lists.range(n)` builds (n a literal), and a comprehension its range's cost plus, per
element, its body and two units. A range of unknown size (request data) counts as one
element: only what is certain is refused.

Relies on (checked with cel-python 0.5.0 and lark 1.3.1; canaries: tests/canary/test_celpy.py):
- `celpy grammar rule names`: the node names the estimate charges.
- `celpy member_dot_arg children`: method calls and macros, via `syntax.call_parts`.
"""

from __future__ import annotations

from typing import Any

import lark
from celpy.evaluation import TranspilerTree

from webhook.engine.cel.comprehensions import TWO_VARIABLE_MACROS
from webhook.engine.cel.syntax import MACROS, call_parts, ident_name, subtrees

SELECTOR_COST_LIMIT = 1_000_000
"""resourceapi.CELSelectorExpressionMaxCost."""

_ONE_UNIT = frozenset(
    {
        "member_dot",
        "member_index",
        "ident_arg",
        "dot_ident_arg",
        "ident",
        "dot_ident",
        "relation_lt",
        "relation_le",
        "relation_gt",
        "relation_ge",
        "relation_eq",
        "relation_ne",
        "relation_in",
        "addition_add",
        "addition_sub",
        "multiplication_mul",
        "multiplication_div",
        "multiplication_mod",
        "unary_not",
        "unary_neg",
    }
)
_LITERAL_COST = {"list_lit": 10, "map_lit": 30}


def _single(node: Any) -> Any:
    while (
        isinstance(node, lark.Tree)
        and node.data not in _LITERAL_COST
        and len(node.children) == 1
        and isinstance(node.children[0], lark.Tree)
    ):
        node = node.children[0]
    return node


def _range_size(node: Any) -> int | None:
    """`lists.range(n)` with a literal n: cel-go's estimate knows its size, n elements."""
    call = _single(node)
    if not isinstance(call, TranspilerTree) or call.data != "member_dot_arg":
        return None
    receiver, name, args = call_parts(call)
    if name != "range" or ident_name(receiver) != "lists" or len(args) != 1:
        return None
    literal = _single(args[0])
    token = literal.children[0] if isinstance(literal, lark.Tree) and literal.children else None
    if not isinstance(token, lark.Token) or token.type != "INT_LIT":
        return None
    return max(int(str(token), 0), 0)


def _size(node: Any) -> int:
    ranged = _range_size(node)
    if ranged is not None:
        return ranged
    literal = _single(node)
    if not isinstance(literal, lark.Tree) or literal.data not in _LITERAL_COST:
        return 1
    items = subtrees(subtrees(literal)[0]) if subtrees(literal) else []
    return len(items) if literal.data == "list_lit" else len(items) // 2


def estimate(node: TranspilerTree | Any) -> int:
    """The worst-case cost of evaluating `node` (a parse tree)."""
    if not isinstance(node, lark.Tree):
        return 0
    if node.data == "member_dot_arg" and isinstance(node, TranspilerTree):
        receiver, name, args = call_parts(node)
        if (name in MACROS or name in TWO_VARIABLE_MACROS) and len(args) >= 2:
            bodies = sum(estimate(a) for a in args[1:])
            return estimate(receiver) + _size(receiver) * (bodies + 2)
        allocated = _range_size(node) or 0  # the list built, one unit per element
        return 1 + allocated + estimate(receiver) + sum(estimate(a) for a in args)
    own = _ONE_UNIT.__contains__(node.data) + _LITERAL_COST.get(node.data, 0)
    return own + sum(estimate(child) for child in node.children)
