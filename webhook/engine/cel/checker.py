"""The static type check Kubernetes runs when a selector or rule is created.

Walks the parse tree once, giving every node a CEL type and refusing what cel-go's checker
refuses, with its message classes: "found no matching overload for ...", "undeclared
reference to ...", "undefined field ...", "expected type 'X' but found 'Y'" (a list or map
literal of mixed types), invalid constant arguments (a regex, duration or conversion of a
literal that can never succeed), and a result that is not a bool. Variables other than
`device` are JSON data and check as `dyn`, so only what is certain is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import lark
from celpy.evaluation import TranspilerTree

from webhook.engine.cel.comprehensions import TRANSFORMS
from webhook.engine.cel.errors import CelCompileError
from webhook.engine.cel.syntax import MACROS, call_parts, column, ident_name, namespace_of, subtrees
from webhook.engine.cel.transpile import is_two_variable
from webhook.engine.cel.types import (
    ANY,
    BOOL,
    BYTES,
    DOUBLE,
    DYN,
    INT,
    NULL,
    OBJECT_FIELDS,
    OVERLOADS,
    QUALIFIED_TYPE_VALUES,
    STRING,
    TYPE_VALUES,
    UINT,
    VARIABLE_TYPES,
    CelType,
    list_of,
    map_of,
    optional_of,
    show,
)
from webhook.engine.cel.unify import resolve

_BINARY = {
    "relation_lt": "_<_", "relation_le": "_<=_", "relation_gt": "_>_", "relation_ge": "_>=_",
    "relation_eq": "_==_", "relation_ne": "_!=_", "relation_in": "@in",
    "addition_add": "_+_", "addition_sub": "_-_",
    "multiplication_mul": "_*_", "multiplication_div": "_/_", "multiplication_mod": "_%_",
}
_LITERALS = {
    "INT_LIT": INT, "UINT_LIT": UINT, "FLOAT_LIT": DOUBLE, "STRING_LIT": STRING,
    "MLSTRING_LIT": STRING, "BYTES_LIT": BYTES, "MLBYTES_LIT": BYTES, "BOOL_LIT": BOOL,
    "NULL_LIT": NULL,
}
_CONSTANT_CHECKS = {"matches": "''.matches({})", "find": "''.find({})", "findAll": "''.findAll({})",
                    "duration": "duration({})", "timestamp": "timestamp({})", "int": "int({})",
                    "uint": "uint({})", "double": "double({})", "bool": "bool({})"}
"""Calls whose literal argument is validated when the expression is compiled."""

ConstantCheck = Callable[[str], str | None]
"""Evaluates a constant expression's text: None, or the error it raises."""


def _fail(message: str, node: Any) -> CelCompileError:
    return CelCompileError(message, column(node))


def _no_overload(name: str, receiver: CelType | None, args: list[CelType], node: Any) -> Exception:
    shown = ", ".join(show(a) for a in args)
    applied = f"{show(receiver)}.({shown})" if receiver is not None else f"({shown})"
    return _fail(f"found no matching overload for '{name}' applied to '{applied}'", node)


class Checker:
    """Types one expression; `check(tree)` returns its type or raises CelCompileError."""

    def __init__(self, source: str, variables: frozenset[str], constant: ConstantCheck,
                 bind: bool) -> None:
        self.source, self.variables, self.constant = source, variables, constant
        self.bind = bind
        self.homogeneous = True

    def check(self, node: Any, scope: Mapping[str, CelType]) -> CelType:
        if isinstance(node, lark.Token):
            return DYN
        handler: Callable[[Any, Mapping[str, CelType]], CelType] | None = getattr(
            self, "_" + node.data, None)
        if handler is not None:
            return handler(node, scope)
        children = subtrees(node)
        if len(children) == 1:
            return self.check(children[0], scope)
        if len(children) == 2 and children[0].data in _BINARY:
            return self._binary(children[0], children[1], scope)
        raise _fail(f"unsupported syntax: {node.data}", node)

    def _binary(self, op: TranspilerTree, right: TranspilerTree,
                scope: Mapping[str, CelType]) -> CelType:
        args = [self.check(op.children[0], scope), self.check(right, scope)]
        return self._call(_BINARY[op.data], None, args, op)

    def _call(self, name: str, receiver: CelType | None, args: list[CelType], node: Any
              ) -> CelType:
        overloads = OVERLOADS.get(name)
        if overloads is None:
            raise _fail(f"undeclared reference to '{name}'", node)
        found = resolve(overloads, receiver, args)
        if found is None:
            raise _no_overload(name, receiver, args, node)
        return found

    def _expr(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        parts = subtrees(node)
        if len(parts) == 1:
            return self.check(parts[0], scope)
        return self._call("_?_:_", None, [self.check(p, scope) for p in parts], node)

    def _conditionalor(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        return self._logical("_||_", node, scope)

    def _conditionaland(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        return self._logical("_&&_", node, scope)

    def _logical(self, name: str, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        parts = subtrees(node)
        if len(parts) == 1:
            return self.check(parts[0], scope)
        return self._call(name, None, [self.check(p, scope) for p in parts], node)

    def _unary(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        parts = subtrees(node)
        if len(parts) == 1:
            return self.check(parts[0], scope)
        name = "!_" if parts[0].data == "unary_not" else "-_"
        return self._call(name, None, [self.check(parts[1], scope)], node)

    def _literal(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        return _LITERALS.get(node.children[0].type, DYN)  # type: ignore[union-attr]

    def _ident(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        name = str(node.children[0])
        if name in scope:
            return scope[name]
        if name in self.variables:
            return VARIABLE_TYPES.get(name, DYN)
        if name in TYPE_VALUES:
            return ("type", TYPE_VALUES[name])
        raise _fail(f"undeclared reference to '{name}'", node)

    _dot_ident = _ident

    def _paren_expr(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        return self.check(subtrees(node)[0], scope)

    def _list_lit(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        items = subtrees(subtrees(node)[0]) if subtrees(node) else []
        return list_of(self._homogeneous(items, scope))

    def _map_lit(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        items = subtrees(subtrees(node)[0]) if subtrees(node) else []
        return map_of(self._homogeneous(items[0::2], scope), self._homogeneous(items[1::2], scope))

    def _homogeneous(self, items: list[TranspilerTree], scope: Mapping[str, CelType]) -> CelType:
        if not items:
            return DYN
        exempt, self.homogeneous = not self.homogeneous, True
        checked = [(item, self.check(item, scope)) for item in items]
        # an empty optional entry (`?optional.none()`) is dyn and fits any element type
        kinds = [k for item, k in checked if k != DYN or not self._optional_entry(item)] or [DYN]
        reference = min(kinds, key=_open_parameters)
        if exempt:
            return reference if all(_fits(k, reference) for k in kinds) else DYN
        for item, kind in checked:
            if not _fits(kind, reference) and (kind != DYN or not self._optional_entry(item)):
                raise _fail(f"expected type '{show(reference)}' but found '{show(kind)}'", item)
        return reference

    def _optional_entry(self, item: TranspilerTree) -> bool:
        """A `?` entry of a literal (rewritten by optional_entries before parsing)."""
        start = getattr(getattr(item, "meta", None), "start_pos", None)
        return start is not None and self.source.startswith("_dg_optentry(", start)

    def _member_dot(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        qualified = self._qualified_type(node, scope)
        if qualified is not None:
            return qualified
        return self._select(self.check(node.children[0], scope), str(node.children[1]), node)

    def _qualified_type(self, node: TranspilerTree, scope: Mapping[str, CelType]
                        ) -> CelType | None:
        """`net.IP` names a type, unless `net` is a variable of the expression."""
        package = ident_name(node.children[0])
        if package is None or package in scope or package in self.variables:
            return None
        kind = QUALIFIED_TYPE_VALUES.get(f"{package}.{node.children[1]}")
        return None if kind is None else ("type", kind)

    def _select(self, kind: CelType, field: str, node: Any) -> CelType:
        if kind in (DYN, ANY):
            return DYN
        if isinstance(kind, tuple) and kind[0] == "map":
            if kind[1] not in (STRING, DYN):
                raise _no_overload("_[_]", None, [kind, STRING], node)
            return kind[2]
        fields = OBJECT_FIELDS.get(kind) if isinstance(kind, str) else None
        if fields is None:
            raise _fail(f"type '{show(kind)}' does not support field selection", node)
        if field not in fields:
            raise _fail(f"undefined field '{field}'", node)
        return fields[field]

    def _member_index(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        container, index = (self.check(c, scope) for c in subtrees(node))
        return self._call("_[_]", None, [container, index], node)

    def _member_object(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        raise _fail("message construction is not supported here", node)

    def _ident_arg(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        name = str(node.children[0])
        args = subtrees(node.children[1]) if len(node.children) > 1 else []
        if name == "has":
            return self._has(args, scope, node)
        kinds = [self.check(a, scope) for a in args]
        self._constant_arguments(name, args[-1:] if name == "matches" else args[:1], node)
        return self._call(name, None, kinds, node)

    _dot_ident_arg = _ident_arg

    def _has(self, args: list[TranspilerTree], scope: Mapping[str, CelType], node: Any
             ) -> CelType:
        selection = _single(args[0]) if len(args) == 1 else None
        if selection is None or selection.data != "member_dot":
            raise _fail("invalid argument to has() macro", node)
        self.check(selection, scope)
        return BOOL

    def _member_dot_arg(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        receiver, name, args = call_parts(node)
        namespace = namespace_of(receiver, self.variables)
        if namespace == "cel" and name == "bind":
            if not self.bind:
                raise _fail("undeclared reference to 'cel.bind' (only selectors offer it)", node)
            init = self.check(args[1], scope)
            return self.check(args[2], {**scope, str(ident_name(args[0])): init})
        if namespace is not None:
            kinds = [self.check(a, scope) for a in args]
            return self._call(f"{namespace}.{name}", None, kinds, node)
        target = self.check(receiver, scope)
        if name in ("_dg_optsel", "_dg_optindex"):
            return self._optional_select(target, args, scope, node)
        if is_two_variable(name, args):
            return self._two_variable(name, target, args, scope, node)
        if name in MACROS:
            return self._macro(name, target, args, scope, node)
        if name == "format":  # cel-go exempts format's argument list from homogeneity
            self.homogeneous = False
        kinds = [self.check(a, scope) for a in args]
        self.homogeneous = True
        self._constant_arguments(name, args[:1], node)
        if name == "format":
            self._constant_format(receiver, args, node)
        return self._call(name, target, kinds, node)

    def _macro(self, name: str, target: CelType, args: list[TranspilerTree],
               scope: Mapping[str, CelType], node: Any) -> CelType:
        element = _range_element(target, node)
        inner = {**scope, str(ident_name(args[0])): element}
        bodies = [self.check(a, inner) for a in args[1:]]
        predicates = bodies if name != "map" else bodies[:-1]
        for arg, kind in zip(args[1:], predicates, strict=False):
            if kind not in (BOOL, DYN, ANY):
                raise _fail(f"expected type 'bool' but found '{show(kind)}'", arg)
        if name == "map":
            return list_of(bodies[-1])
        return list_of(element) if name == "filter" else BOOL

    def _optional_select(self, target: CelType, args: list[TranspilerTree],
                         scope: Mapping[str, CelType], node: Any) -> CelType:
        """`x.?f` / `x[?k]`: an optional of what `x.f` / `x[k]` would be."""
        if isinstance(target, tuple) and target[0] == "optional_type":
            target = target[1]
        key = self.check(args[0], scope)
        if isinstance(target, tuple) and target[0] == "list":
            return optional_of(self._call("_[_]", None, [target, key], node))
        if isinstance(target, tuple) and target[0] == "map":
            return optional_of(self._call("_[_]", None, [target, key], node))
        field = self.source[
            args[0].meta.start_pos + 1:args[0].meta.end_pos - 1]
        return optional_of(self._select(target, field, node))

    def _two_variable(self, name: str, target: CelType, args: list[TranspilerTree],
                      scope: Mapping[str, CelType], node: Any) -> CelType:
        names = [str(ident_name(a)) for a in args[:2]]
        if names[0] == names[1]:
            raise _fail(f"duplicate variable name: {names[0]}", args[1])
        if "__result__" in names:
            raise _fail("iteration variable overwrites accumulator variable", node)
        element = _range_element(target, node)
        first = INT if isinstance(target, tuple) and target[0] == "list" else element
        second = target[-1] if isinstance(target, tuple) else DYN
        inner = {**scope, str(ident_name(args[0])): first, str(ident_name(args[1])): second}
        kinds = [self.check(a, inner) for a in args[2:]]
        predicates = kinds if name not in TRANSFORMS else kinds[:-1]
        for arg, kind in zip(args[2:], predicates, strict=False):
            if kind not in (BOOL, DYN, ANY):
                raise _fail(f"expected type 'bool' but found '{show(kind)}'", arg)
        if name == "transformList":
            return list_of(kinds[-1])
        if name == "transformMap":
            return map_of(first, kinds[-1])
        return kinds[-1] if name == "transformMapEntry" else BOOL

    def _constant_arguments(self, name: str, args: list[TranspilerTree], node: Any) -> None:
        template = _CONSTANT_CHECKS.get(name)
        literal = _single(args[0]) if args else None
        if template is None or literal is None or literal.data != "literal":
            return
        error = self.constant(template.format(self._text(literal)))
        if error is not None:
            raise _fail(f"invalid {name} argument", node)

    def _constant_format(self, receiver: Any, args: list[TranspilerTree], node: Any) -> None:
        """cel-go formats a literal template with literal arguments at compile time."""
        template = _single(receiver)
        values = _whole_list(args[0]) if len(args) == 1 else None
        if values is None or getattr(template, "data", None) != "literal":
            return
        items = subtrees(subtrees(values)[0]) if subtrees(values) else []
        if any(_single(i).data != "literal" for i in items):
            return
        error = self.constant(f"{self._text(template)}.format({self._text(values)})")
        if error is not None:
            raise _fail(f"error during formatting: {error}", node)

    def _text(self, node: TranspilerTree) -> str:
        return self.source[node.meta.start_pos:node.meta.end_pos]


def _whole_list(node: Any) -> Any:
    """The list literal that is the whole of `node`, if it is one, else None."""
    while isinstance(node, lark.Tree) and node.data != "list_lit" and len(node.children) == 1:
        node = node.children[0]
    return node if isinstance(node, lark.Tree) and node.data == "list_lit" else None


def _single(node: Any) -> Any:
    """The one meaningful node under a chain of single-child wrappers."""
    while isinstance(node, lark.Tree) and len(node.children) == 1 and isinstance(
            node.children[0], lark.Tree):
        node = node.children[0]
    return node


def _range_element(target: CelType, node: Any) -> CelType:
    if isinstance(target, tuple) and target[0] in ("list", "map"):
        return target[1]
    if target in (DYN, ANY):
        return DYN
    raise _fail(
        f"expression of type '{show(target)}' cannot be range of a comprehension "
        "(must be list, map, or dynamic)", node)


def check_types(tree: TranspilerTree, source: str, variables: frozenset[str],
                constant: ConstantCheck, *, bind: bool) -> CelType:
    """The expression's CEL type; CelCompileError where Kubernetes' checker refuses it.

    `bind`: whether `cel.bind` is declared (the DRA selector environment adds it).
    """
    return Checker(source, variables, constant, bind).check(tree, {})


def require_bool_type(kind: CelType, *, dyn_allowed: bool) -> None:
    """The result rule: bool, or the unknown type (google.protobuf.Any, a DRA attribute).

    A selector whose result is `dyn` is refused as the API server does; dragate's validation
    rules read dyn-typed request data, so there `dyn` waits for the value.
    """
    if kind not in (BOOL, ANY) and not (dyn_allowed and kind == DYN):
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {show(kind)}", 1)


def _open_parameters(kind: CelType) -> int:
    """How many type parameters are dyn (an empty literal's `[]` is `list(dyn)`)."""
    if not isinstance(kind, tuple):
        return 0
    return sum(1 if p == DYN else _open_parameters(p) for p in kind[1:])


def _fits(kind: CelType, reference: CelType) -> bool:
    """Same type, or the same but for dyn parameters: `[[], [1]]` is a `list(list(int))`."""
    if kind == reference:
        return True
    if not (isinstance(kind, tuple) and isinstance(reference, tuple)):
        return False
    same_shape = kind[0] == reference[0] and len(kind) == len(reference)
    return same_shape and all(
        DYN in (a, b) or _fits(a, b) for a, b in zip(kind[1:], reference[1:], strict=True)
    )

