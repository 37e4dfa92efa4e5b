"""celpy's parser and transpiler internals that webhook/engine/cel builds on."""

from __future__ import annotations

import re
from pathlib import Path
from string import Template
from typing import Any

import pytest
from canary.canary_support import Internal, present, rows, takes, verify

from webhook.engine.cel.cost import _LITERAL_COST, _ONE_UNIT
from webhook.engine.cel.program import _CELTYPES, _EVALUATION
from webhook.engine.cel.syntax import _lark, call_parts, parse
from webhook.engine.cel.transpile import transpile

RULES = (
    frozenset(
        {
            "expr",
            "conditionalor",
            "conditionaland",
            "unary",
            "member",
            "member_dot_arg",
            "member_object",
            "primary",
            "paren_expr",
            "exprlist",
            "fieldinits",
            "mapinits",
            "literal",
        }
    )
    | _ONE_UNIT
    | _LITERAL_COST.keys()
)
"""The parse-tree node names the reference walker, checker, cost estimate and transpiler use."""
SAMPLES = (
    "[1, 2].map(x, x + 1) == [2, 3] && has(a.b) || a.c.exists(y, y > 1)",
    "a.c.all(x, x <= 2) ? 'st'.contains('t') : 1 in [1] && a.c.filter(x, x != 1).size() >= 0",
    "a.c.exists_one(x, x < 2) || -a.n * 2 / 1 % 3 - 1 > 0 || !false || {'k': 1}['k'] == 1",
    "'a'.startsWith('a') && 'a'.endsWith('a') && 'a'.matches('a') && int('1') == dyn(1)",
    "a.c[0] >= 1.0 && string(a.n) == 'x' && duration('1s') > duration('0s')",
)
"""Expressions covering every construct the transpiler emits code for."""
SCOPE_METHODS = frozenset({"resolve_variable", "nested_activation"})
"""What program.Scope offers transpiled code (and celpy's macros) besides variables."""
OVERRIDDEN = (
    "bool_lt",
    "bool_le",
    "bool_gt",
    "bool_ge",
    "bool_eq",
    "bool_ne",
    "operator_in",
    "function_contains",
    "function_startsWith",
    "function_endsWith",
)
"""operators.EVALUATION_OVERRIDES that transpiled code reaches (`matches` is the library's)."""


def _code() -> str:
    return "\n".join(transpile(parse(text), frozenset({"a"})) for text in SAMPLES)


def _grammar_file() -> None:
    import celpy

    grammar = Path(celpy.__file__).parent / "cel.lark"
    assert grammar.is_file(), f"no {grammar}"


def _grammar_rules() -> None:
    names = {r.origin.name for r in _lark().rules} | {r.alias for r in _lark().rules if r.alias}
    missing = sorted(RULES - {str(n) for n in names})
    assert not missing, f"the grammar has no rule {missing}"


def _call_shape() -> None:
    """member_dot_arg: children (receiver, method name, exprlist of the arguments)."""
    tree = parse("a.f(1, 2)")
    node = next(tree.find_data("member_dot_arg"))
    receiver, name, args = call_parts(node)
    assert (receiver.data, name, len(args)) == ("member", "f", 2), (receiver.data, name, args)


def _tree_decorations() -> None:
    from celpy.evaluation import TranspilerTree

    tree = TranspilerTree("ident", [])
    for field in ("expr_number", "transpiled", "checked_exception"):
        assert hasattr(tree, field), f"TranspilerTree has no {field}"


def _checked_exception_expanded() -> None:
    """Phase 2 expands a node's (Template, {name: fn(tree)}) into statements; `statements`
    ends with the `CEL = ...` assignment our `_dg_main` returns."""
    from celpy.evaluation import Activation, Phase2Transpiler

    tree = parse("1")
    tree.checked_exception = (Template("ex_${n} = lambda activation: 1"), {"n": lambda t: "7"})
    tree.transpiled = "ex_7(activation)"
    phase2 = Phase2Transpiler(type("Facade", (), {"base_activation": Activation()})())
    phase2.visit(tree)
    statements = phase2.statements(tree)
    assert statements[0] == "ex_7 = lambda activation: 1", statements
    assert statements[-1].startswith("CEL = celpy.evaluation.result(base_activation,"), statements


def _emitted_names() -> None:
    """Every celpy name the transpiled code calls is in the namespace program.py gives it."""
    code = _code()
    evaluation = set(re.findall(r"celpy\.evaluation\.(\w+)", code)) - set(vars(_EVALUATION))
    celtypes = set(re.findall(r"celpy\.celtypes\.(\w+)", code)) - set(vars(_CELTYPES))
    methods = set(re.findall(r"activation\.(\w+)\(", code)) - SCOPE_METHODS
    assert not (evaluation or celtypes or methods), (evaluation, celtypes, methods)


def _overrides_called() -> None:
    """The operators and functions program.py replaces are still what transpiled code calls."""
    code = _code()
    missing = [name for name in OVERRIDDEN if f"celpy.evaluation.{name}(" not in code]
    assert not missing, f"transpiled code no longer calls {missing}"


def _macros_use_scope_only() -> None:
    """celpy's macros need nothing of an activation but nested_activation(vars=...)."""
    import celpy.celtypes as ct
    from celpy import evaluation

    class Scope:
        def __init__(self, values: dict[str, Any]) -> None:
            self.values = values

        def nested_activation(self, vars: dict[str, Any]) -> Scope:
            return Scope({**self.values, **vars})

    items = ct.ListType([ct.IntType(1), ct.IntType(2)])

    def source(_: Any) -> Any:
        return items

    def body(scope: Any) -> Any:
        return ct.BoolType(scope.values["x"] > 1)

    for name in ("macro_map", "macro_filter", "macro_all", "macro_exists", "macro_exists_one"):
        getattr(evaluation, name)(Scope({}), "x", body, source)


INTERNALS = [
    Internal("cel-python", "celpy grammar file cel.lark", _grammar_file),
    Internal(
        "cel-python",
        "celpy.celparser.CELParser.ambiguous_literals",
        present("celpy.celparser.CELParser.ambiguous_literals"),
    ),
    Internal("cel-python", "celpy grammar rule names", _grammar_rules),
    Internal("cel-python", "celpy member_dot_arg children", _call_shape),
    Internal("cel-python", "celpy.evaluation.TranspilerTree", _tree_decorations),
    Internal(
        "cel-python",
        "celpy.evaluation.base_functions",
        lambda: present("celpy.evaluation.base_functions")()["int"],
    ),
    Internal("cel-python", "celpy.evaluation.Activation()", present("celpy.evaluation.Activation")),
    Internal(
        "cel-python",
        "celpy.evaluation.Phase1Transpiler(facade)",
        takes("celpy.evaluation.Phase1Transpiler.__init__", "self", "facade"),
    ),
    *(
        Internal(
            "cel-python",
            f"celpy.evaluation.Phase1Transpiler.{hook}({param})",
            takes(f"celpy.evaluation.Phase1Transpiler.{hook}", "self", param),
        )
        for hook, param in (
            ("func_name", "label"),
            ("literal", "tree"),
            ("ident_arg", "tree"),
            ("member_dot", "tree"),
            ("member_dot_arg", "tree"),
        )
    ),
    Internal(
        "cel-python",
        "celpy.evaluation.Phase2Transpiler.statements(tree)",
        _checked_exception_expanded,
    ),
    Internal("cel-python", "celpy transpiled code names", _emitted_names),
    Internal(
        "cel-python",
        "celpy.evaluation.result(activation, cel_expr)",
        takes("celpy.evaluation.result", "activation", "cel_expr"),
    ),
    Internal("cel-python", "celpy.evaluation bool_*, operator_in, function_*", _overrides_called),
    Internal("cel-python", "celpy.evaluation.macro_*", _macros_use_scope_only),
]


@pytest.mark.parametrize("internal", rows(INTERNALS))
def test_celpy_internal_still_there(internal: Internal) -> None:
    verify(internal)
