"""Literal arguments Kubernetes validates when an expression is created, not when it runs.

`'x'.matches('[')`, `duration('1y')`, `int('a')` and a literal `format` template whose literal
arguments do not fit it are refused at compile time by cel-go; the check evaluates the
constant sub-expression (through `ConstantCheck`, the compiler's own evaluator) and refuses
the expression if it fails.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lark
from celpy.evaluation import TranspilerTree

from webhook.engine.cel.syntax import compile_error, single, subtrees, whole_list

ConstantCheck = Callable[[str], str | None]
"""Evaluates a constant expression's text: None, or the error it raises."""
_CONSTANT_CHECKS = {
    "matches": "''.matches({})",
    "find": "''.find({})",
    "findAll": "''.findAll({})",
    "duration": "duration({})",
    "timestamp": "timestamp({})",
    "int": "int({})",
    "uint": "uint({})",
    "double": "double({})",
    "bool": "bool({})",
}
"""Calls whose literal argument is validated when the expression is compiled."""


def check_constant_arguments(
    constant: ConstantCheck, source: str, name: str, args: list[TranspilerTree], node: Any
) -> None:
    """Refuse `name(literal)` when evaluating it can only fail."""
    template = _CONSTANT_CHECKS.get(name)
    literal = single(args[0]) if args else None
    if template is None or literal is None or literal.data != "literal":
        return
    if constant(template.format(text_of(source, literal))) is not None:
        raise compile_error(f"invalid {name} argument", node)


def check_constant_format(
    constant: ConstantCheck, source: str, receiver: Any, args: list[TranspilerTree], node: Any
) -> None:
    """cel-go formats a literal template with literal arguments at compile time."""
    template = single(receiver)
    values = whole_list(args[0]) if len(args) == 1 else None
    if values is None or getattr(template, "data", None) != "literal":
        return
    items = subtrees(subtrees(values)[0]) if subtrees(values) else []
    if any(single(i).data != "literal" for i in items):
        return
    error = constant(f"{text_of(source, template)}.format({text_of(source, values)})")
    if error is not None:
        raise compile_error(f"error during formatting: {error}", node)


def text_of(source: str, node: lark.Tree[Any]) -> str:
    """The source text a node was parsed from."""
    return source[node.meta.start_pos : node.meta.end_pos]
