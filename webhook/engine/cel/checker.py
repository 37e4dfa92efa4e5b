"""The static type check Kubernetes runs when a selector or rule is created.

Walks the parse tree once, giving every node a CEL type and refusing what cel-go's checker
refuses, with its message classes: "found no matching overload for ...", "undeclared
reference to ...", "undefined field ...", "expected type 'X' but found 'Y'" (a list or map
literal of mixed types), invalid constant arguments (a regex, duration or conversion of a
literal that can never succeed), and a result that is not a bool. `device` has the DRA
selector's type; a `TypeEnvironment` declares the others (a policy rule's `request`, and
`object` typed from the Kubernetes schema of one kind); undeclared ones are JSON data and check
as `dyn`, so only what is certain is refused. Comprehensions
are typed in `comprehension_types`, literal arguments validated in `constant_arguments`.

Relies on (checked with cel-python 0.5.0 and lark 1.3.1; canaries: tests/canary/test_celpy.py):
- `celpy grammar rule names`: the node names the checker dispatches on (`_<rule>` methods).
- `celpy member_dot_arg children`: method calls and macros, via `syntax.call_parts`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import lark
from celpy.evaluation import TranspilerTree

from webhook.engine.cel.comprehension_types import check_macro, check_sort_by, check_two_variable
from webhook.engine.cel.constant_arguments import (
    ConstantCheck,
    check_constant_arguments,
    check_constant_format,
)
from webhook.engine.cel.errors import CelCompileError
from webhook.engine.cel.kindtests import static_kind_test
from webhook.engine.cel.schematypes import find_field
from webhook.engine.cel.syntax import (
    MACROS,
    SORT_BY,
    call_parts,
    compile_error,
    ident_name,
    namespace_of,
    single,
    subtrees,
)
from webhook.engine.cel.transpile import is_two_variable
from webhook.engine.cel.types import (
    ANY,
    BOOL,
    BYTES,
    DOUBLE,
    DYN,
    INT,
    NEW_IN,
    NULL,
    OBJECT_FIELDS,
    OVERLOADS,
    QUALIFIED_TYPE_VALUES,
    STRING,
    TYPE_VALUES,
    UINT,
    UNTYPED,
    VARIABLE_TYPES,
    CelType,
    TypeEnvironment,
    is_object,
    list_of,
    map_of,
    optional_of,
    show,
)
from webhook.engine.cel.unify import fits, open_parameters, resolve
from webhook.types.kubeversions import NEWEST, minor_number

_BINARY = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}
_LITERALS = {
    "INT_LIT": INT,
    "UINT_LIT": UINT,
    "FLOAT_LIT": DOUBLE,
    "STRING_LIT": STRING,
    "MLSTRING_LIT": STRING,
    "BYTES_LIT": BYTES,
    "MLBYTES_LIT": BYTES,
    "BOOL_LIT": BOOL,
    "NULL_LIT": NULL,
}


def _no_overload(name: str, receiver: CelType | None, args: list[CelType], node: Any) -> Exception:
    shown = ", ".join(show(a) for a in args)
    applied = f"{show(receiver)}.({shown})" if receiver is not None else f"({shown})"
    return compile_error(f"found no matching overload for '{name}' applied to '{applied}'", node)


class Checker:
    """Types one expression; `check(tree)` returns its type or raises CelCompileError."""

    def __init__(
        self,
        source: str,
        variables: frozenset[str],
        constant: ConstantCheck,
        bind: bool,
        environment: TypeEnvironment = UNTYPED,
        *,
        minor: str = NEWEST,
    ) -> None:
        self.source, self.variables, self.constant = source, variables, constant
        self.bind, self.environment, self.minor = bind, environment, minor
        self.homogeneous = True

    def offers(self, name: str) -> bool:
        """Whether the target minor's API server declares `name` for new expressions."""
        since = NEW_IN.get(name)
        return since is None or minor_number(self.minor) >= minor_number(since)

    def check(self, node: Any, scope: Mapping[str, CelType]) -> CelType:
        if isinstance(node, lark.Token):
            return DYN
        handler: Callable[[Any, Mapping[str, CelType]], CelType] | None = getattr(
            self, "_" + node.data, None
        )
        if handler is not None:
            return handler(node, scope)
        children = subtrees(node)
        if len(children) == 1:
            return self.check(children[0], scope)
        if len(children) == 2 and children[0].data in _BINARY:
            return self._binary(children[0], children[1], scope)
        raise compile_error(f"unsupported syntax: {node.data}", node)

    def _binary(
        self, op: TranspilerTree, right: TranspilerTree, scope: Mapping[str, CelType]
    ) -> CelType:
        args = [self.check(op.children[0], scope), self.check(right, scope)]
        return self._call(_BINARY[op.data], None, args, op)

    def _call(self, name: str, receiver: CelType | None, args: list[CelType], node: Any) -> CelType:
        overloads = OVERLOADS.get(name) if self.offers(name) else None
        if overloads is None:
            raise compile_error(f"undeclared reference to '{name}'", node)
        found = resolve(overloads, receiver, args)
        if found is None:
            raise _no_overload(name, receiver, args, node)
        return found

    def _expr(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        parts = subtrees(node)
        if len(parts) == 1:
            return self.check(parts[0], scope)
        known = static_kind_test(parts[0], self.environment.kind, scope)
        if known is not None:  # the other branch never runs on this kind
            self.check(parts[0], scope)
            return self.check(parts[1] if known else parts[2], scope)
        return self._call("_?_:_", None, [self.check(p, scope) for p in parts], node)

    def _conditionalor(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        return self._logical("_||_", node, scope)

    def _conditionaland(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        return self._logical("_&&_", node, scope)

    def _logical(self, name: str, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        parts = subtrees(node)
        if len(parts) == 1:
            return self.check(parts[0], scope)
        deciding = name == "_||_"  # the value that decides alone: true for ||, false for &&
        for part in parts:
            if static_kind_test(part, self.environment.kind, scope) is deciding:
                self.check(part, scope)  # the other operand never decides on this kind
                return BOOL
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
            return self.environment.variables.get(name, VARIABLE_TYPES.get(name, DYN))
        if name in TYPE_VALUES:
            return ("type", TYPE_VALUES[name])
        raise compile_error(f"undeclared reference to '{name}'", node)

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
        reference = min(kinds, key=open_parameters)
        if exempt:
            return reference if all(fits(k, reference) for k in kinds) else DYN
        for item, kind in checked:
            if not fits(kind, reference) and (kind != DYN or not self._optional_entry(item)):
                found = f"expected type '{show(reference)}' but found '{show(kind)}'"
                raise compile_error(found, item)
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

    def _qualified_type(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType | None:
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
        fields = self._fields(kind)
        if fields is None:
            raise compile_error(f"type '{show(kind)}' does not support field selection", node)
        found = find_field(fields, field)
        if found is None:
            raise compile_error(f"undefined field '{field}'", node)
        return found

    def _fields(self, kind: CelType) -> Mapping[str, CelType] | None:
        if is_object(kind):
            return self.environment.objects.get(str(kind[1]), {})
        return OBJECT_FIELDS.get(kind) if isinstance(kind, str) else None

    def _member_index(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        container, index = (self.check(c, scope) for c in subtrees(node))
        return self._call("_[_]", None, [container, index], node)

    def _member_object(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        raise compile_error("message construction is not supported here", node)

    def _ident_arg(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        name = str(node.children[0])
        args = subtrees(node.children[1]) if len(node.children) > 1 else []
        if name == "has":
            return self._has(args, scope, node)
        kinds = [self.check(a, scope) for a in args]
        constants = args[-1:] if name == "matches" else args[:1]
        check_constant_arguments(self.constant, self.source, name, constants, node)
        return self._call(name, None, kinds, node)

    _dot_ident_arg = _ident_arg

    def _has(self, args: list[TranspilerTree], scope: Mapping[str, CelType], node: Any) -> CelType:
        selection = single(args[0]) if len(args) == 1 else None
        if selection is None or selection.data != "member_dot":
            raise compile_error("invalid argument to has() macro", node)
        self.check(selection, scope)
        return BOOL

    def _member_dot_arg(self, node: TranspilerTree, scope: Mapping[str, CelType]) -> CelType:
        receiver, name, args = call_parts(node)
        namespace = namespace_of(receiver, self.variables)
        if namespace == "cel" and name == "bind":
            if not self.bind:
                refused = "undeclared reference to 'cel.bind' (only selectors offer it)"
                raise compile_error(refused, node)
            init = self.check(args[1], scope)
            return self.check(args[2], {**scope, str(ident_name(args[0])): init})
        if namespace is not None:
            kinds = [self.check(a, scope) for a in args]
            return self._call(f"{namespace}.{name}", None, kinds, node)
        target = self.check(receiver, scope)
        if name in ("_dg_optsel", "_dg_optindex"):
            return self._optional_select(target, args, scope, node)
        comprehension = self._comprehension(name, target, args, scope, node)
        if comprehension is not None:
            return comprehension
        if name == "format":  # cel-go exempts format's argument list from homogeneity
            self.homogeneous = False
        kinds = [self.check(a, scope) for a in args]
        self.homogeneous = True
        check_constant_arguments(self.constant, self.source, name, args[:1], node)
        if name == "format":
            check_constant_format(self.constant, self.source, receiver, args, node)
        return self._call(name, target, kinds, node)

    def _comprehension(
        self,
        name: str,
        target: CelType,
        args: list[TranspilerTree],
        scope: Mapping[str, CelType],
        node: Any,
    ) -> CelType | None:
        """The type of a macro call (`all`, `map`, `sortBy`...); None for a function call."""
        if is_two_variable(name, args):
            return check_two_variable(self.check, name, target, args, scope=scope, node=node)
        if name in MACROS:
            return check_macro(self.check, name, target, args, scope=scope, node=node)
        if name == SORT_BY and self.offers(name) and len(args) == 2 and ident_name(args[0]):
            return check_sort_by(self.check, target, args, scope=scope, node=node)
        return None

    def _optional_select(
        self, target: CelType, args: list[TranspilerTree], scope: Mapping[str, CelType], node: Any
    ) -> CelType:
        """`x.?f` / `x[?k]`: an optional of what `x.f` / `x[k]` would be."""
        if isinstance(target, tuple) and target[0] == "optional_type":
            target = target[1]
        key = self.check(args[0], scope)
        if isinstance(target, tuple) and target[0] == "list":
            return optional_of(self._call("_[_]", None, [target, key], node))
        if isinstance(target, tuple) and target[0] == "map":
            return optional_of(self._call("_[_]", None, [target, key], node))
        field = self.source[args[0].meta.start_pos + 1 : args[0].meta.end_pos - 1]
        return optional_of(self._select(target, field, node))


def check_types(
    tree: TranspilerTree,
    source: str,
    variables: frozenset[str],
    constant: ConstantCheck,
    *,
    bind: bool,
    environment: TypeEnvironment = UNTYPED,
    minor: str = NEWEST,
) -> CelType:
    """The expression's CEL type; CelCompileError where Kubernetes' checker refuses it.

    `bind`: whether `cel.bind` is declared (the DRA selector environment adds it);
    `environment`: the declared types of variables (others are dyn); `minor`: the target
    Kubernetes minor, which decides the functions declared (`types.NEW_IN`).
    """
    return Checker(source, variables, constant, bind, environment, minor=minor).check(tree, {})


def require_bool_type(kind: CelType, *, dyn_allowed: bool) -> None:
    """The result rule: bool, or the unknown type (google.protobuf.Any, a DRA attribute).

    A selector whose result is `dyn` is refused as the API server does; dragate's validation
    rules read dyn-typed request data, so there `dyn` waits for the value.
    """
    if kind not in (BOOL, ANY) and not (dyn_allowed and kind == DYN):
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {show(kind)}", 1)
