"""AST -> Python source, through celpy's transpiler with three adjustments.

1. Library functions are bound to plain identifiers (`_dg_compareTo`) in the program's own
   globals instead of celpy's `module.qualname` text, which would need `webhook` importable
   from inside celpy's module namespace.
2. Namespaced calls (`sets.contains(a, b)`, `strings.quote(s)`) become calls of the dotted
   global function, and `cel.bind(x, init, body)` becomes a lazily-evaluated binding.
3. celpy treats `.min(...)` as a macro; Kubernetes' `list.min()` is a method, so a `min`
   call is emitted as an ordinary function call.
4. A field named as Kubernetes escapes a schema property (`x.__namespace__`, `x.a__dash__b`)
   reads that property, as the API server's values do.
5. celpy's `has()` yields a Python bool, which `!` and `&&` refuse ("no such overload"); it is
   wrapped into a CEL bool so `has(x.y) && x.y == 1` short-circuits as CEL specifies.

The statements are wrapped in one function, `_dg_main(base_activation)`, so evaluation is a
plain call with no shared module globals (celpy's own runner writes the activation into its
module globals, which is not safe with several threads).

Relies on (checked with cel-python 0.5.0 and lark 1.3.1; canaries: tests/canary/test_celpy.py):
- `celpy.evaluation.Phase1Transpiler(facade)`: subclassed; reads `facade.base_activation`.
- `celpy.evaluation.Phase1Transpiler.func_name(label)`: overridden, library names.
- `celpy.evaluation.Phase1Transpiler.literal(tree)`: overridden, multi-line strings.
- `celpy.evaluation.Phase1Transpiler.ident_arg(tree)`: extended, `has()`.
- `celpy.evaluation.Phase1Transpiler.member_dot(tree)`: extended, escaped field names.
- `celpy.evaluation.Phase1Transpiler.member_dot_arg(tree)`: overridden, calls and macros.
- `celpy.evaluation.Phase2Transpiler.statements(tree)`: expands each node's `checked_exception`
  (Template, {name: fn(tree)}) and ends with `CEL = ...`.
- `celpy.evaluation.TranspilerTree`: `transpiled`, `expr_number`, `checked_exception`.
- `celpy.evaluation.Activation()`: the facade's base activation, built empty.
"""

from __future__ import annotations

from string import Template
from textwrap import dedent
from types import SimpleNamespace
from typing import Any, cast

from celpy.evaluation import Activation, Phase1Transpiler, Phase2Transpiler, TranspilerTree
from lark import Token

from webhook.engine.cel.comprehensions import TRANSFORMS, TWO_VARIABLE_MACROS
from webhook.engine.cel.library import FUNCTIONS, python_name
from webhook.engine.cel.schematypes import unescape
from webhook.engine.cel.syntax import MACROS, SORT_BY, call_parts, ident_name, namespace_of

_BIND = Template(
    dedent("""\
    # cel.bind:
    ex_${n}_i = lambda activation: ${init}
    ex_${n}_x = lambda activation: ${body}
    ex_${n} = lambda activation: _dg_bind(activation, '${var}', ex_${n}_x, ex_${n}_i)""")
)


_HAS = Template(
    dedent("""\
    # ident_arg has:
    ex_${n}_h = lambda activation: ${exprlist}
    ex_${n} = lambda activation: celpy.celtypes.BoolType(
        not isinstance(celpy.evaluation.result(activation, ex_${n}_h), CELEvalError))""")
)


_TWO_VARIABLE = Template(
    dedent("""\
    # two-variable comprehension:
    ex_${n}_t = lambda activation: ${target}
    ex_${n}_k = ${keep}
    ex_${n}_b = lambda activation: ${body}
    ex_${n} = lambda activation: _dg_comprehend(activation, '${macro}',
        celpy.evaluation.result(activation, ex_${n}_t), names=('${first}', '${second}'),
        keep=ex_${n}_k, body=ex_${n}_b, result=celpy.evaluation.result)""")
)


_SORT_BY = Template(
    dedent("""\
    # sortBy:
    ex_${n}_t = lambda activation: ${target}
    ex_${n}_k = lambda activation: ${key}
    ex_${n} = lambda activation: _dg_sort_by(activation,
        celpy.evaluation.result(activation, ex_${n}_t), '${var}', ex_${n}_k,
        celpy.evaluation.result)""")
)


def _lambda(node: TranspilerTree | None) -> str:
    return "None" if node is None else f"lambda activation: {node.transpiled}"


def is_two_variable(name: str, args: list[TranspilerTree]) -> bool:
    """`x.all(i, v, p)`, `x.transformList(i, v, [filter,] body)`: two bound names first."""
    return (
        name in TWO_VARIABLE_MACROS
        and len(args) in (3, 4)
        and (len(args) == 3 or name in TRANSFORMS)
        and ident_name(args[0]) is not None
        and ident_name(args[1]) is not None
    )


class _Phase1(Phase1Transpiler):
    """celpy's first pass, aware of the Kubernetes library and namespaced functions."""

    def __init__(self, facade: Any, variables: frozenset[str]) -> None:
        super().__init__(facade)
        self.variables = variables

    def func_name(self, label: str) -> str:
        return python_name(label) if label in FUNCTIONS else super().func_name(label)

    def literal(self, tree: TranspilerTree) -> None:
        """celpy drops the raw newlines of a non-raw triple-quoted string; escape them first."""
        token = tree.children[0]
        if isinstance(token, Token) and token.type == "MLSTRING_LIT" and token.value[0] in "'\"":
            text = token.value.replace("\r", "\\r").replace("\n", "\\n")
            children = cast(list[Any], tree.children)
            children[0] = Token("MLSTRING_LIT", text)
            super().literal(tree)
            children[0] = token
            return
        super().literal(tree)

    def member_dot(self, tree: TranspilerTree) -> None:
        token = tree.children[1]
        plain = unescape(str(token))
        if plain == token or not isinstance(token, Token):
            super().member_dot(tree)
            return
        children = cast(list[Any], tree.children)
        children[1] = Token(token.type, plain)
        super().member_dot(tree)
        children[1] = token

    def ident_arg(self, tree: TranspilerTree) -> None:
        super().ident_arg(tree)
        if tree.children[0] == "has" and tree.checked_exception is not None:
            tree.checked_exception = (_HAS, tree.checked_exception[1])

    def member_dot_arg(self, tree: TranspilerTree) -> None:
        receiver, name, args = call_parts(tree)
        namespace = namespace_of(receiver, self.variables)
        if namespace == "cel" and name == "bind":
            self._bind(tree, args)
        elif namespace is None and is_two_variable(name, args):
            self._two_variable(tree, name, receiver, args)
        elif namespace is not None:
            arguments = ", ".join(a.transpiled for a in args)
            tree.transpiled = f"{python_name(f'{namespace}.{name}')}({arguments})"
        elif name in MACROS:
            super().member_dot_arg(tree)
        elif name == SORT_BY and len(args) == 2 and ident_name(args[0]) is not None:
            self._sort_by(tree, receiver, args)
        else:
            arguments = ", ".join(a.transpiled for a in (receiver, *args))
            tree.transpiled = f"{self.func_name(name)}({arguments})"

    def _two_variable(
        self, tree: TranspilerTree, name: str, receiver: TranspilerTree, args: list[TranspilerTree]
    ) -> None:
        keep = args[2] if len(args) == 4 else None
        tree.checked_exception = (
            _TWO_VARIABLE,
            {
                "n": lambda t: str(t.expr_number),
                "target": lambda t: receiver.transpiled,
                "keep": lambda t: _lambda(keep),
                "body": lambda t: args[-1].transpiled,
                "macro": lambda t: name,
                "first": lambda t: str(ident_name(args[0])),
                "second": lambda t: str(ident_name(args[1])),
            },
        )
        tree.transpiled = f"ex_{tree.expr_number}(activation)"

    def _sort_by(
        self, tree: TranspilerTree, receiver: TranspilerTree, args: list[TranspilerTree]
    ) -> None:
        tree.checked_exception = (
            _SORT_BY,
            {
                "n": lambda t: str(t.expr_number),
                "target": lambda t: receiver.transpiled,
                "key": lambda t: args[1].transpiled,
                "var": lambda t: str(ident_name(args[0])),
            },
        )
        tree.transpiled = f"ex_{tree.expr_number}(activation)"

    def _bind(self, tree: TranspilerTree, args: list[TranspilerTree]) -> None:
        variable = ident_name(args[0])
        tree.checked_exception = (
            _BIND,
            {
                "n": lambda t: str(t.expr_number),
                "init": lambda t: args[1].transpiled,
                "body": lambda t: args[2].transpiled,
                "var": lambda t: str(variable),
            },
        )
        tree.transpiled = f"ex_{tree.expr_number}(activation)"


def transpile(tree: TranspilerTree, variables: frozenset[str]) -> str:
    """Python source defining `_dg_main(base_activation)`, which returns the CEL result."""
    facade = SimpleNamespace(base_activation=Activation())
    _Phase1(facade, variables).visit(tree)
    phase2 = Phase2Transpiler(facade)  # type: ignore[arg-type]
    phase2.visit(tree)
    lines = [line for statement in phase2.statements(tree) for line in statement.splitlines()]
    body = "\n".join("    " + line for line in lines if line.strip())
    return f"def _dg_main(base_activation):\n{body}\n    return CEL\n"
