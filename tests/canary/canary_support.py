"""Canaries for the third-party internals dragate relies on.

A module that uses something a library does not document (a private attribute, a class meant to
be subclassed only inside the library, the shape of generated code) says so in a "Relies on"
section of its docstring, one bullet per internal:

    Relies on (checked with cel-python 0.5.0; canaries: tests/canary/test_celpy.py):
    - `celpy.evaluation.result(activation, cel_expr)`: replaced in the code's namespace.

Each canary table has one row per such name, with a check of the shape or behaviour relied on.
When a release moves one, the row fails naming the release, the internal and every module that
relies on it; `test_relies_on.py` keeps the docstrings and the tables the same list.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "webhook"
_BULLET = re.compile(r"^\s*- `([^`]+)`")


@dataclass(frozen=True)
class Internal:
    """One internal of `distribution` that dragate relies on, and how to see it is still there."""

    distribution: str
    name: str
    check: Callable[[], object]

    @property
    def key(self) -> str:
        """The name as the docstrings list it: the call's arguments left out."""
        return relied_name(self.name)


def relied_name(text: str) -> str:
    return text.split("(", 1)[0].strip()


def rows(internals: Iterable[Internal]) -> list[Any]:
    return [pytest.param(internal, id=internal.key) for internal in internals]


def verify(internal: Internal) -> None:
    """Run the row's check; on any failure, say which release moved what, and who needs it."""
    try:
        internal.check()
    except Exception as error:  # any failure of the check is the finding
        failure = f"{type(error).__name__}: {error}"
    else:
        return
    users = ", ".join(users_of(internal.key)) or "(no module lists it)"
    version = metadata.version(internal.distribution)
    pytest.fail(
        f"{internal.distribution} {version} moved {internal.key}: {users} relies on it ({failure})",
        pytrace=False,
    )


def resolve(dotted: str) -> Any:
    """The object at `dotted`: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(f"no module in {dotted}")


def present(dotted: str) -> Callable[[], object]:
    return lambda: resolve(dotted)


def takes(dotted: str, *params: str) -> Callable[[], None]:
    """A callable whose parameters start with `params` (self included for methods)."""

    def check() -> None:
        found = list(inspect.signature(resolve(dotted)).parameters)
        assert found[: len(params)] == list(params), f"parameters are {found}, expected {params}"

    return check


def subclasses(dotted: str, base: str) -> Callable[[], None]:
    def check() -> None:
        assert issubclass(resolve(dotted), resolve(base)), f"not a subclass of {base}"

    return check


def relied_on_by_module() -> dict[str, list[str]]:
    """{module path: the names its docstring's "Relies on" section lists}, for every module."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        names = _relies_on(ast.get_docstring(ast.parse(path.read_text())) or "")
        if names:
            found[str(path.relative_to(PACKAGE.parent))] = names
    return found


def users_of(key: str) -> list[str]:
    return [module for module, names in relied_on_by_module().items() if key in names]


def _relies_on(docstring: str) -> list[str]:
    names: list[str] = []
    inside = False
    for line in docstring.splitlines():
        if line.startswith("Relies on"):
            inside = True
        elif inside and (match := _BULLET.match(line)):
            names.append(relied_name(match.group(1)))
        elif inside and not line.startswith("  "):
            inside = False
    return names
