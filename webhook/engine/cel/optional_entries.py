"""Optional entries in list and map literals: `[a, ?b]`, `{?'k': v}` (cel-go OptionalTypes).

An entry marked `?` must be an optional; it is left out when empty and unwrapped when present.
celpy's grammar has no such entry, so `rewrite_optional_entries` turns each marked literal into
`_dg_optlist([a, _dg_optentry(b)])` / `_dg_optmap({'k': _dg_optentry(v)})` before parsing,
outside string literals. A `?` is an entry mark when it opens an entry of a list or map literal
(right after `[`, `{` or a `,` of one); anywhere else it is the conditional operator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from webhook.engine.cel.errors import NoSuchOverload
from webhook.engine.cel.values import type_name

_STRING = re.compile(
    r"""[rRbB]{0,2}("{3}[\s\S]*?"{3}|'{3}[\s\S]*?'{3}|"(\\.|[^"\\])*"|'(\\.|[^'\\])*')"""
)


@dataclass
class _Frame:
    """One open bracket: where it opened in the output, and the entries marked so far."""

    bracket: str
    literal: bool
    opened_at: int
    marked: bool = False
    wrapping: bool = False
    awaiting_colon: bool = False
    entry_start: bool = True
    pieces: list[str] = field(default_factory=list)


def rewrite_optional_entries(source: str) -> str:
    """The source with marked entries wrapped; unchanged when it has no `?` entry."""
    if "?" not in source:
        return source
    out: list[str] = []
    stack: list[_Frame] = []
    at = 0
    while at < len(source):
        string = _STRING.match(source, at) if source[at] in "'\"rRbB" else None
        if string is not None and (source[at] in "'\"" or _starts_literal(source, at)):
            _text(out, stack, string.group(0))
            at = string.end()
            continue
        _char(out, stack, source, at)
        at += 1
    return "".join(out)


def _starts_literal(source: str, at: int) -> bool:
    """`r'...'` / `b"..."`: a prefix letter not ending an identifier."""
    return at == 0 or not (source[at - 1].isalnum() or source[at - 1] == "_")


def _text(out: list[str], stack: list[_Frame], text: str) -> None:
    out.append(text)
    if stack and not text.isspace():
        stack[-1].entry_start = False


def _char(out: list[str], stack: list[_Frame], source: str, at: int) -> None:
    char = source[at]
    top = stack[-1] if stack else None
    if char in "[{(":
        literal = char != "(" and not _ends_expression(out)
        _text(out, stack, char)
        stack.append(_Frame(char, literal, len(out) - 1))
    elif char in "]})":
        if top is not None:
            _end_entry(out, top)
            stack.pop()
            out.append(char)
            if top.marked:
                out.insert(top.opened_at, "_dg_optlist(" if char == "]" else "_dg_optmap(")
                out.append(")")
        else:
            out.append(char)
        if stack:
            stack[-1].entry_start = False
    elif top is not None and top.literal and char == "?" and top.entry_start:
        top.marked = True
        if top.bracket == "[":
            out.append("_dg_optentry(")
            top.wrapping = True
        else:
            top.awaiting_colon = True
        top.entry_start = False
    elif top is not None and top.literal and char == ",":
        _end_entry(out, top)
        out.append(char)
        top.entry_start = True
    elif top is not None and top.awaiting_colon and char == ":":
        out.append(": _dg_optentry(")
        top.awaiting_colon, top.wrapping = False, True
    else:
        _text(out, stack, char)


def _ends_expression(out: list[str]) -> bool:
    """Whether the output so far ends an operand, so a `[` after it is an index."""
    tail = "".join(out[-8:]).rstrip()
    return bool(tail) and (tail[-1].isalnum() or tail[-1] in "_)]}'\"")


def _end_entry(out: list[str], frame: _Frame) -> None:
    if frame.wrapping:
        out.append(")")
        frame.wrapping = False


class _Entry:
    """A marked entry's optional, until the literal holding it keeps or drops it."""

    __slots__ = ("optional",)

    def __init__(self, optional: Any) -> None:
        self.optional = optional


def entry(value: Any) -> _Entry:
    if getattr(value, "CEL_TYPE_NAME", None) != "optional_type":
        raise NoSuchOverload(f"no such overload: optional entry applied to {type_name(value)}")
    return _Entry(value)


def _kept(value: Any) -> tuple[bool, Any]:
    if not isinstance(value, _Entry):
        return True, value
    return value.optional.present, value.optional.value


def entry_list(values: Any) -> Any:
    """The list literal without its empty marked entries."""
    kept = [v for present, v in map(_kept, values) if present]
    return type(values)(kept)


def entry_map(values: Any) -> Any:
    """The map literal without the keys whose marked value is empty."""
    kept = {}
    for key, value in values.items():
        present, plain = _kept(value)
        if present:
            kept[key] = plain
    return type(values)(kept)


FUNCTIONS = {"_dg_optentry": entry, "_dg_optlist": entry_list, "_dg_optmap": entry_map}
