"""The Kubernetes CEL library as one table of Python functions, keyed by CEL function name.

celpy calls a member function `x.f(a)` as `f(x, a)`, so names shared by several receiver types
(`compareTo` on Quantity and Semver, `indexOf` on strings and lists) get one dispatcher each.
Every function is wrapped so that a CEL error value passed in as an argument comes straight
back out, as in cel-go, instead of being reported as a confusing type mismatch.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from webhook.engine.cel import (
    ext_lists,
    formatting,
    lists,
    named_formats,
    network,
    optional_entries,
    optionals,
    quantity,
    regex,
    semver,
    sets,
    strings,
    urls,
)
from webhook.engine.cel.budget import charge, size_units
from webhook.engine.cel.errors import CelFunctionError
from webhook.engine.cel.quantity import Quantity
from webhook.engine.cel.semver import Semver
from webhook.engine.cel.values import expect, type_name
from webhook.types.kubeversions import minor_number

CelFunction = Callable[..., Any]


def _compare(receiver: Any, other: Any, function: str) -> int:
    if isinstance(receiver, Quantity | Semver):
        if type(other) is not type(receiver):
            raise CelFunctionError(
                f"no such overload: {function}({type_name(receiver)}, {type_name(other)})"
            )
        return receiver.compare(other)
    raise CelFunctionError(f"no such overload: {function} applied to {type_name(receiver)}")


def compare_to(receiver: Any, other: Any) -> ct.IntType:
    return ct.IntType(_compare(receiver, other, "compareTo"))


def is_greater_than(receiver: Any, other: Any) -> ct.BoolType:
    return ct.BoolType(_compare(receiver, other, "isGreaterThan") > 0)


def is_less_than(receiver: Any, other: Any) -> ct.BoolType:
    return ct.BoolType(_compare(receiver, other, "isLessThan") < 0)


def add(receiver: Any, other: Any) -> Quantity:
    return quantity.add(expect(receiver, Quantity, "add"), other)


def sub(receiver: Any, other: Any) -> Quantity:
    return quantity.sub(expect(receiver, Quantity, "sub"), other)


def index_of(receiver: Any, *args: Any) -> ct.IntType:
    if isinstance(receiver, ct.StringType):
        return strings.string_index_of(receiver, *args)
    return lists.list_index_of(expect(receiver, ct.ListType, "indexOf"), *args)


def last_index_of(receiver: Any, *args: Any) -> ct.IntType:
    if isinstance(receiver, ct.StringType):
        return strings.string_last_index_of(receiver, *args)
    return lists.list_last_index_of(expect(receiver, ct.ListType, "lastIndexOf"), *args)


def index_of_clamped(receiver: Any, *args: Any) -> ct.IntType:
    if isinstance(receiver, ct.StringType):
        return strings.string_index_of(receiver, *args, clamped=True)
    return index_of(receiver, *args)


def last_index_of_clamped(receiver: Any, *args: Any) -> ct.IntType:
    if isinstance(receiver, ct.StringType):
        return strings.string_last_index_of(receiver, *args, clamped=True)
    return last_index_of(receiver, *args)


def _propagating(function: CelFunction) -> CelFunction:
    """Return the first CEL error among the arguments instead of calling the function."""

    @wraps(function)
    def call(*args: Any) -> Any:
        for arg in args:
            if isinstance(arg, CELEvalError):
                return arg
        charge(1 + size_units(*args))
        result = function(*args)
        if isinstance(result, str | list):
            charge(len(result) // 10)
        return result

    return call


def _table() -> dict[str, CelFunction]:
    shared: dict[str, CelFunction] = {
        "compareTo": compare_to,
        "isGreaterThan": is_greater_than,
        "isLessThan": is_less_than,
        "add": add,
        "sub": sub,
        "indexOf": index_of,
        "lastIndexOf": last_index_of,
    }
    table: dict[str, CelFunction] = {}
    modules: tuple[dict[str, CelFunction], ...] = (
        quantity.FUNCTIONS,
        semver.FUNCTIONS,
        strings.FUNCTIONS,
        lists.FUNCTIONS,
        ext_lists.FUNCTIONS,
        sets.FUNCTIONS,
        regex.FUNCTIONS,
        optionals.FUNCTIONS,
        optional_entries.FUNCTIONS,
        network.FUNCTIONS,
        urls.FUNCTIONS,
        named_formats.FUNCTIONS,
        formatting.FUNCTIONS,
        shared,
    )
    for module_table in modules:
        table.update(module_table)
    return {name: _propagating(function) for name, function in table.items()}


FUNCTIONS: dict[str, CelFunction] = _table()
"""CEL name -> implementation; dotted names (`sets.contains`) are namespaced globals."""

_CEL_GO_0_29: dict[str, CelFunction] = {
    name: _propagating(function)
    for name, function in (("indexOf", index_of_clamped), ("lastIndexOf", last_index_of_clamped))
}
"""Kubernetes 1.37 builds on cel-go 0.29, whose string indexOf / lastIndexOf clamp an empty
needle's offset to the string's length and refuse a negative one."""


def functions_for(minor: str) -> dict[str, CelFunction]:
    """The runtime table for a target minor: what differs between cel-go releases."""
    return {**FUNCTIONS, **_CEL_GO_0_29} if minor_number(minor) >= 37 else FUNCTIONS


NAMESPACES = frozenset(name.split(".")[0] for name in FUNCTIONS if "." in name) | {"cel"}
"""Identifiers that only ever prefix a function name: `sets.contains(...)`, `cel.bind(...)`."""


def python_name(cel_name: str) -> str:
    """The identifier a library function is bound to in transpiled code."""
    return "_dg_" + cel_name.replace(".", "__")
