"""cel-go ext strings `format`: `'%s-%d'.format(['a', 1])`, for the common verbs.

Supported: `%s` (strings, numbers, bools, null, durations, timestamps), `%d` (integers), `%f`
with an optional precision (doubles and integers, default 6), `%e` (doubles, printed as
cel-go's `3.140000` times ten to a superscript power), `%x` / `%X` / `%o` / `%b` (integers),
`%%`. Any other verb or a value of the wrong kind is an error, never a guess.
"""

from __future__ import annotations

import re
from typing import Any

import celpy.celtypes as ct

from webhook.engine.cel.errors import CelFunctionError
from webhook.engine.cel.operators import go_float_text
from webhook.engine.cel.values import expect, type_name

_VERB = re.compile(r"%(?:\.(\d+))?([sdfexXob%])|%")
_INTEGERS = (ct.IntType, ct.UintType)


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, ct.BoolType):
        return "true" if value else "false"
    if isinstance(value, ct.DoubleType):
        return go_float_text(float(value))
    if isinstance(value, (ct.StringType, *_INTEGERS)):
        return str(value)
    if isinstance(value, ct.DurationType):
        return go_float_text(value.total_seconds()) + "s"
    if isinstance(value, ct.TimestampType):
        return _rfc3339(value)
    raise CelFunctionError(f"format: %s of a {type_name(value)} is not supported")


def _integer(value: Any, verb: str) -> int:
    if not isinstance(value, _INTEGERS) or isinstance(value, ct.BoolType):
        raise CelFunctionError(f"format: %{verb} needs an integer, not {type_name(value)}")
    return int(value)


def _one(verb: str, precision: str | None, value: Any) -> str:
    if verb == "s":
        return _text(value)
    if verb == "e":
        return _scientific(value, 6)
    if verb == "f":
        if not isinstance(value, ct.DoubleType):  # cel-go: fixed-point is for doubles only
            raise CelFunctionError(f"format: %{verb} needs a double, not {type_name(value)}")
        return f"{float(value):.{int(precision or 6)}{verb}}"
    if verb == "b" and isinstance(value, ct.BoolType):  # cel-go prints a bool in binary too
        return "1" if value else "0"
    number = _integer(value, verb)
    return format(number, {"d": "d", "x": "x", "X": "X", "o": "o", "b": "b"}[verb])


_SUPERSCRIPT = str.maketrans(
    "0123456789-", "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207b"
)


def _scientific(value: Any, precision: int) -> str:
    """cel-go prints %e through golang.org/x/text: mantissa, multiplication sign, `10⁰⁰`.

    cel-go passes the precision as a width (`%6e`), so six decimals are always printed.
    """
    if not isinstance(value, ct.DoubleType):
        raise CelFunctionError(f"format: %e needs a double, not {type_name(value)}")
    mantissa, _, exponent = f"{float(value):.{precision}e}".partition("e")
    power = f"{'-' if exponent.startswith('-') else ''}{abs(int(exponent)):02d}"
    return f"{mantissa}\u00d710{power.translate(_SUPERSCRIPT)}"


def _rfc3339(stamp: ct.TimestampType) -> str:
    """Go's RFC3339Nano in the timestamp's own offset: no trailing zeros, `Z` for UTC."""
    text = stamp.strftime("%Y-%m-%dT%H:%M:%S")
    if stamp.microsecond:
        text += f".{stamp.microsecond:06d}".rstrip("0")
    offset = stamp.utcoffset()
    minutes = int(offset.total_seconds()) // 60 if offset else 0
    if not minutes:
        return text + "Z"
    sign = "+" if minutes > 0 else "-"
    return f"{text}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def format_string(template: Any, args: Any) -> ct.StringType:
    """`template.format(args)`."""
    text = str(expect(template, ct.StringType, "format"))
    values = list(expect(args, ct.ListType, "format"))
    out: list[str] = []
    at = used = 0
    for match in _VERB.finditer(text):
        out.append(text[at : match.start()])
        at = match.end()
        precision, verb = match.group(1), match.group(2)
        if verb is None:
            raise CelFunctionError(f"format: unsupported verb at {match.start()}")
        if verb == "%":
            out.append("%")
            continue
        if used >= len(values):
            raise CelFunctionError(f"index {used} out of range")
        out.append(_one(verb, precision, values[used]))
        used += 1
    out.append(text[at:])
    return ct.StringType("".join(out))


FUNCTIONS = {"format": format_string}
