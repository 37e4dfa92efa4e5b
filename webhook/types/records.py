"""`record`: a frozen dataclass that is as cheap to build as a plain one.

A frozen dataclass's `__init__` sets each field through `object.__setattr__` (its own
`__setattr__` refuses), a call per field, which makes it several times as slow to build as
the same class unfrozen, and every review builds about ten such values. A `record`
keeps all that `dataclass(frozen=True)` makes (fields, repr, eq, hash, the refusal to
change a field, `dataclasses.replace`) and gets an `__init__` that stores its fields into
the new instance's `__dict__` directly, as a plain class's does.

Only what the per-review values use is supported (positional-or-keyword fields, defaults
and default factories); a class asking for more (slots, keyword-only or non-init fields,
`__post_init__`) is refused when it is decorated, never half-built.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")
_FACTORY = object()
"""A default standing for "call the field's default factory"."""


@dataclass_transform(frozen_default=True, eq_default=True)
def record(cls: type[T]) -> type[T]:
    """`@dataclass(frozen=True)`, with the plain-speed `__init__` described above."""
    built = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(built)  # type: ignore[arg-type]
    _refuse_unsupported(built, fields)
    built.__init__ = _init_for(built.__qualname__, fields)  # type: ignore[method-assign]
    return built


def _refuse_unsupported(cls: type[Any], fields: tuple[dataclasses.Field[Any], ...]) -> None:
    unsupported = [f.name for f in fields if not f.init or f.kw_only is True]
    if unsupported or "__slots__" in vars(cls) or hasattr(cls, "__post_init__"):
        raise TypeError(f"record {cls.__qualname__}: only plain fields are supported")


def _init_for(name: str, fields: tuple[dataclasses.Field[Any], ...]) -> Any:
    """The `__init__` for `fields`, compiled once per class as dataclasses does its own."""
    scope: dict[str, Any] = {"_FACTORY": _FACTORY}
    params, lines = ["self"], ["    values = self.__dict__"]
    for field in fields:
        if field.default is not dataclasses.MISSING:
            scope[f"_default_{field.name}"] = field.default
            params.append(f"{field.name}=_default_{field.name}")
        elif field.default_factory is not dataclasses.MISSING:
            scope[f"_factory_{field.name}"] = field.default_factory
            params.append(f"{field.name}=_FACTORY")
            lines.append(f"    if {field.name} is _FACTORY: {field.name} = _factory_{field.name}()")
        else:
            params.append(field.name)
        lines.append(f"    values[{field.name!r}] = {field.name}")
    source = f"def __init__({', '.join(params)}):\n" + "\n".join(lines) + "\n"
    exec(source, scope)  # built from field names only, as dataclasses does
    init = scope["__init__"]
    init.__qualname__ = f"{name}.__init__"
    return init
