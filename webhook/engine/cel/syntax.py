"""Parsing and static checks: everything that can be said about an expression before it runs.

The parser is our own Lark instance built from celpy's grammar with celpy's `TranspilerTree`
nodes. celpy's `CELParser` keeps one class-level parser whose tree class is fixed by whichever
Environment is created first in the process, so a stray `celpy.Environment()` (interpreted
runner) elsewhere would make every later compiled-runner parse produce the wrong node type.
Owning the parser removes that order dependence.

Relies on (checked with cel-python 0.5.0 and lark 1.3.1; canaries: tests/canary/test_celpy.py):
- `celpy grammar file cel.lark`: read from the installed package, in the celpy package directory.
- `celpy.celparser.CELParser.ambiguous_literals`: the IDENT lexer callback.
- `celpy grammar rule names`: the node names the walkers dispatch on.
- `celpy member_dot_arg children`: (receiver, method name, exprlist), see `call_parts`.
- `celpy.evaluation.TranspilerTree`: the tree class; its transpiler decorations.
- `celpy.evaluation.base_functions`: the names of CEL's standard functions.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import celpy
import lark
from celpy.celparser import CELParser
from celpy.evaluation import TranspilerTree, base_functions

from webhook.engine.cel.comprehensions import TWO_VARIABLE_MACROS
from webhook.engine.cel.errors import CelCompileError
from webhook.engine.cel.library import FUNCTIONS, NAMESPACES
from webhook.engine.cel.types import QUALIFIED_TYPE_VALUES

MACROS = frozenset({"map", "filter", "all", "exists", "exists_one"})
SORT_BY = "sortBy"
"""cel-go ext lists' macro: `list.sortBy(e, key)`, transpiled apart from celpy's macros."""
TYPE_NAMES = frozenset(
    {
        "int",
        "uint",
        "double",
        "bool",
        "string",
        "bytes",
        "list",
        "map",
        "null_type",
        "type",
        "timestamp",
        "duration",
    }
)
KNOWN_FUNCTIONS = frozenset(FUNCTIONS) | frozenset(base_functions) | {"has", "dyn"}

_parser: lark.Lark | None = None
_parser_lock = threading.Lock()


def _lark() -> lark.Lark:
    global _parser  # noqa: PLW0603 - built once, lazily: building it is slow
    with _parser_lock:
        if _parser is None:
            grammar = (Path(celpy.__file__).parent / "cel.lark").read_text()
            _parser = lark.Lark(
                grammar,
                parser="lalr",
                start="expr",
                g_regex_flags=re.M,
                lexer_callbacks={"IDENT": CELParser.ambiguous_literals},
                propagate_positions=True,
                maybe_placeholders=False,
                priority="invert",
                tree_class=TranspilerTree,
            )
        return _parser


def parse(expression: str) -> TranspilerTree:
    """The AST, or CelCompileError with the column of the first syntax error."""
    try:
        tree: TranspilerTree = _lark().parse(expression)  # type: ignore[assignment]
        return tree
    except lark.exceptions.UnexpectedInput as error:
        first_line = str(error).strip().splitlines()[0]
        raise CelCompileError(
            f"syntax error: {first_line}", getattr(error, "column", None)
        ) from None
    except lark.exceptions.LarkError as error:
        raise CelCompileError(f"syntax error: {error}") from None


def subtrees(node: Any) -> list[TranspilerTree]:
    return [c for c in node.children if isinstance(c, TranspilerTree)]


def column(node: Any) -> int | None:
    return getattr(node.meta, "column", None) if isinstance(node, lark.Tree) else None


def compile_error(message: str, node: Any) -> CelCompileError:
    """The error for a refused expression, at the column of the node it is about."""
    return CelCompileError(message, column(node))


def single(node: Any) -> Any:
    """The one meaningful node under a chain of single-child wrappers."""
    while (
        isinstance(node, lark.Tree)
        and len(node.children) == 1
        and isinstance(node.children[0], lark.Tree)
    ):
        node = node.children[0]
    return node


def whole_list(node: Any) -> Any:
    """The list literal that is the whole of `node`, if it is one, else None."""
    while isinstance(node, lark.Tree) and node.data != "list_lit" and len(node.children) == 1:
        node = node.children[0]
    return node if isinstance(node, lark.Tree) and node.data == "list_lit" else None


def ident_name(node: Any) -> str | None:
    """The name when an expression is nothing but an identifier (a macro or bind variable)."""
    while isinstance(node, lark.Tree) and node.data != "ident" and len(node.children) == 1:
        node = node.children[0]
    if isinstance(node, lark.Tree) and node.data == "ident":
        return str(node.children[0])
    return None


def call_parts(node: TranspilerTree) -> tuple[TranspilerTree, str, list[TranspilerTree]]:
    """(receiver, method name, argument expressions) of a `member_dot_arg` node."""
    receiver, name = node.children[0], str(node.children[1])
    args = subtrees(node.children[2]) if len(node.children) == 3 else []
    return receiver, name, args  # type: ignore[return-value]


def namespace_of(receiver: TranspilerTree, variables: frozenset[str]) -> str | None:
    """`sets` in `sets.contains(...)`, unless `sets` is a declared variable."""
    name = ident_name(receiver)
    if name in NAMESPACES and name not in variables and receiver.data == "member":
        return name
    return None


class References:
    """Walks the AST once: root variables used, and errors for unknown names."""

    def __init__(self, variables: frozenset[str]) -> None:
        self.variables = variables
        self.used: set[str] = set()

    def walk(self, node: TranspilerTree, bound: frozenset[str]) -> None:
        handler = getattr(self, "_" + node.data, None)
        if handler is not None:
            handler(node, bound)
            return
        for child in subtrees(node):
            self.walk(child, bound)

    def _ident(self, node: TranspilerTree, bound: frozenset[str]) -> None:
        self._root(str(node.children[0]), node, bound)

    def _dot_ident(self, node: TranspilerTree, bound: frozenset[str]) -> None:
        self._root(str(node.children[0]), node, frozenset())

    def _member_dot(self, node: TranspilerTree, bound: frozenset[str]) -> None:
        package = ident_name(node.children[0])
        is_type = f"{package}.{node.children[1]}" in QUALIFIED_TYPE_VALUES
        if package is None or package in bound or package in self.variables or not is_type:
            self.walk(node.children[0], bound)  # type: ignore[arg-type]

    def _root(self, name: str, node: TranspilerTree, bound: frozenset[str]) -> None:
        if name in bound or name in TYPE_NAMES:
            return
        if name not in self.variables:
            raise CelCompileError(f"undeclared reference to '{name}'", column(node))
        self.used.add(name)

    def _ident_arg(self, node: TranspilerTree, bound: frozenset[str]) -> None:
        self._function(str(node.children[0]), node)
        for child in subtrees(node):
            self.walk(child, bound)

    _dot_ident_arg = _ident_arg

    def _function(self, name: str, node: TranspilerTree) -> None:
        if name not in KNOWN_FUNCTIONS:
            raise CelCompileError(f"undeclared reference to function '{name}'", column(node))

    def _member_dot_arg(self, node: TranspilerTree, bound: frozenset[str]) -> None:
        receiver, name, args = call_parts(node)
        namespace = namespace_of(receiver, self.variables)
        if namespace == "cel" and name == "bind":
            self._comprehension(node, args, bound, expected=3, label="cel.bind")
        elif namespace is not None:
            self._function(f"{namespace}.{name}", node)
            self._walk_all(args, bound)
        elif name in TWO_VARIABLE_MACROS and len(args) >= 3 and ident_name(args[1]):
            self.walk(receiver, bound)
            names = frozenset({str(ident_name(args[0])), str(ident_name(args[1]))})
            self._walk_all(args[2:], bound | names)
        elif name in MACROS or (name == SORT_BY and len(args) == 2 and ident_name(args[0])):
            self.walk(receiver, bound)
            self._comprehension(node, args, bound, expected=2, label=name)
        else:
            self._function(name, node)
            self._walk_all([receiver, *args], bound)

    def _comprehension(
        self,
        node: TranspilerTree,
        args: list[TranspilerTree],
        bound: frozenset[str],
        expected: int,
        label: str,
    ) -> None:
        """Macros and cel.bind: first argument a fresh variable, visible in the last one."""
        variable = ident_name(args[0]) if args else None
        if len(args) != expected or variable is None:
            raise CelCompileError(
                f"{label}() takes a variable name and {expected - 1} expression(s)", column(node)
            )
        self._walk_all(args[1:-1], bound)
        self.walk(args[-1], bound | {variable})

    def _walk_all(self, nodes: list[TranspilerTree], bound: frozenset[str]) -> None:
        for child in nodes:
            self.walk(child, bound)
