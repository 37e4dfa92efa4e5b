"""cel-go `ext.Strings` (version 2+ subset) with its code-point semantics.

Python strings are already sequences of code points, which is what cel-go's `[]rune` gives, so
indexes agree with Go for any non-ASCII text. Error messages match cel-go's so that a policy
author reading them can search the upstream docs. Results are capped in size because
`replace`/`join` chained through `cel.bind` could otherwise grow a string exponentially.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import celpy.celtypes as ct

from webhook.engine.cel.errors import BudgetExceeded, CelFunctionError
from webhook.engine.cel.values import expect

MAX_STRING = 1 << 20
"""Largest string a library function may build (1 MiB of code points)."""

_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""Go's unicode.IsSpace set; Python's str.strip() also strips \\x1c-\\x1f, Go does not."""
_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
_UPPER = {c + 32: c for c in range(ord("A"), ord("Z") + 1)}
_QUOTE = str.maketrans(
    {
        "\a": "\\a",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\v": "\\v",
        "\\": "\\\\",
        '"': '\\"',
    }
)


def _string(value: Any, function: str) -> str:
    return str(expect(value, ct.StringType, function))


def _int(value: Any, function: str) -> int:
    if isinstance(value, ct.BoolType):
        raise CelFunctionError(f"no such overload: {function} applied to bool")
    return int(expect(value, ct.IntType, function))


def _capped(text: str) -> ct.StringType:
    if len(text) > MAX_STRING:
        raise BudgetExceeded(f"string result longer than {MAX_STRING} characters")
    return ct.StringType(text)


def char_at(receiver: Any, index: Any) -> ct.StringType:
    text, i = _string(receiver, "charAt"), _int(index, "charAt")
    if i < 0 or i > len(text):
        raise CelFunctionError(f"index out of range: {i}")
    return ct.StringType(text[i : i + 1])


def _empty_needle(start: int, length: int, *, clamped: bool) -> ct.IntType:
    """Where `''` is found from `start`: cel-go 0.26 (Kubernetes 1.35, 1.36) answers the
    offset itself; cel-go 0.29 (1.37) refuses a negative one and clamps to the length."""
    if not clamped:
        return ct.IntType(start)
    if start < 0:
        raise CelFunctionError(f"index out of range: {start}")
    return ct.IntType(min(start, length))


def string_index_of(
    receiver: Any, sub: Any, offset: Any = None, *, clamped: bool = False
) -> ct.IntType:
    """cel-go ext/strings: a negative offset errors, one past the end finds nothing."""
    text, needle = _string(receiver, "indexOf"), _string(sub, "indexOf")
    start = 0 if offset is None else _int(offset, "indexOf")
    if not needle:
        return _empty_needle(start, len(text), clamped=clamped)
    if start < 0:
        raise CelFunctionError(f"index out of range: {start}")
    return ct.IntType(-1 if start >= len(text) else text.find(needle, start))


def string_last_index_of(
    receiver: Any, sub: Any, offset: Any = None, *, clamped: bool = False
) -> ct.IntType:
    """cel-go ext/strings: as indexOf, searching backwards from the offset."""
    text, needle = _string(receiver, "lastIndexOf"), _string(sub, "lastIndexOf")
    if offset is None and not needle:
        return ct.IntType(len(text))
    if offset is None:
        return ct.IntType(text.rfind(needle))
    start = _int(offset, "lastIndexOf")
    if not needle:
        return _empty_needle(start, len(text), clamped=clamped)
    if start < 0:
        raise CelFunctionError(f"index out of range: {start}")
    if start >= len(text):
        return ct.IntType(-1)
    return ct.IntType(text.rfind(needle, 0, start + len(needle)))


def lower_ascii(receiver: Any) -> ct.StringType:
    return ct.StringType(_string(receiver, "lowerAscii").translate(_LOWER))


def upper_ascii(receiver: Any) -> ct.StringType:
    return ct.StringType(_string(receiver, "upperAscii").translate(_UPPER))


def replace(receiver: Any, old: Any, new: Any, count: Any = None) -> ct.StringType:
    text = _string(receiver, "replace")
    old_text, new_text = _string(old, "replace"), _string(new, "replace")
    limit = -1 if count is None else _int(count, "replace")
    hits = text.count(old_text) if old_text else len(text) + 1
    hits = hits if limit < 0 else min(hits, limit)
    if len(text) + hits * (len(new_text) - len(old_text)) > MAX_STRING:  # check before building
        raise BudgetExceeded(f"string result longer than {MAX_STRING} characters")
    return ct.StringType(text.replace(old_text, new_text, limit))


def split(receiver: Any, separator: Any, limit: Any = None) -> ct.ListType:
    text, sep = _string(receiver, "split"), _string(separator, "split")
    n = -1 if limit is None else _int(limit, "split")
    if n == 0:
        return ct.ListType([])
    if sep:
        parts = text.split(sep, n - 1 if n > 0 else -1)
    elif n < 0 or n > len(text):
        parts = list(text)
    else:
        parts = [*text[: n - 1], text[n - 1 :]]
    return ct.ListType([ct.StringType(p) for p in parts])


def substring(receiver: Any, start: Any, end: Any = None) -> ct.StringType:
    text = _string(receiver, "substring")
    first = _int(start, "substring")
    last = len(text) if end is None else _int(end, "substring")
    if end is not None and first > last:
        raise CelFunctionError(f"invalid substring range. start: {first}, end: {last}")
    for index in (first, last):
        if index < 0 or index > len(text):
            raise CelFunctionError(f"index out of range: {index}")
    return ct.StringType(text[first:last])


def trim(receiver: Any) -> ct.StringType:
    return ct.StringType(_string(receiver, "trim").strip(_GO_SPACE))


def join(receiver: Any, separator: Any = None) -> ct.StringType:
    items = expect(receiver, ct.ListType, "join")
    sep = "" if separator is None else _string(separator, "join")
    return _capped(sep.join(_string(item, "join") for item in items))


def quote(value: Any) -> ct.StringType:
    """strings.quote: a double-quoted CEL literal; lone surrogates become U+FFFD like Go."""
    text = _string(value, "strings.quote")
    if any("\ud800" <= c <= "\udfff" for c in text):
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return _capped('"' + text.translate(_QUOTE) + '"')


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "charAt": char_at,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "replace": replace,
    "split": split,
    "substring": substring,
    "trim": trim,
    "join": join,
    "strings.quote": quote,
}
"""indexOf/lastIndexOf are shared with lists and dispatched in library.py."""
