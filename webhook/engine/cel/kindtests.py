"""Kind tests the checker can decide: `object.kind == 'Pod'` when `object` is known to be a Pod.

A DeviceClassPolicy rule runs on Pods, ResourceClaims and ResourceClaimTemplates; one that
reads a field of one kind guards it with a kind test (`object.kind == 'Pod' && ...`,
`object.kind != 'Pod' || ...`, `object.kind == 'Pod' ? ... : true`). When the checker types
the rule for one kind, such a test has a known value, and the operand it makes unreachable
is not type-checked for that kind (the API server's ValidatingAdmissionPolicy has no such
test: its author narrows the kinds with `matchConstraints` instead).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from webhook.engine.cel.syntax import ident_name, single, subtrees
from webhook.engine.cel.types import CelType

_KIND_LITERAL = re.compile(r"""(['"])([A-Za-z0-9]+)\1""")
_TESTS = {"relation_eq": True, "relation_ne": False}


def static_kind_test(node: Any, kind: str, scope: Mapping[str, CelType]) -> bool | None:
    """The value of `node` when it is `object.kind ==/!= 'Kind'` and `object` is a `kind`."""
    if not kind or "object" in scope:  # `object` rebound by a comprehension: not the object
        return None
    node = single(node)
    if getattr(node, "data", None) == "paren_expr":
        return static_kind_test(subtrees(node)[0], kind, scope)
    parts = subtrees(node)
    if len(parts) != 2 or parts[0].data not in _TESTS:
        return None
    left, right = parts[0].children[0], parts[1]
    literal = _kind_literal(left, right) or _kind_literal(right, left)
    if literal is None:
        return None
    return (literal == kind) is _TESTS[parts[0].data]


def _kind_literal(selection: Any, literal: Any) -> str | None:
    """'Pod' when `selection` is `object.kind` and `literal` a plain string literal."""
    dot = single(selection)
    if getattr(dot, "data", None) != "member_dot" or str(dot.children[1]) != "kind":
        return None
    if ident_name(dot.children[0]) != "object":
        return None
    value = single(literal)
    if getattr(value, "data", None) != "literal":
        return None
    found = _KIND_LITERAL.fullmatch(str(value.children[0]))
    return found.group(2) if found else None
