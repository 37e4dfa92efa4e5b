"""Textual analysis of CEL device selectors: no parser, just careful regular expressions.

Lint must stay pure and fast, and the mistakes it looks for are visible in the text:
`device.capacity['memory']` (no domain), `...driverVersion >= '550'` (a version compared as a
string). Lookups inside string literals are ignored, so a policy that *searches* selectors for
a bad pattern (`s.contains("device.capacity['memory']")`) is not itself reported.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

_ACCESS = re.compile(
    r"""\bdevice\s*\.\s*(?P<field>attributes|capacity)\s*
        \[\s*(?P<q>['"])(?P<key>[^'"\\]*)(?P=q)\s*\]
        (?:\s*\.\s*(?P<ident>[A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()
          |\s*\[\s*(?P<q2>['"])(?P<ident2>[^'"\\]*)(?P=q2)\s*\])?""",
    re.VERBOSE,
)
_OPERAND = r"""(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?[uU]?
    |[A-Za-z_]\w*\s*\(\s*(?:'[^']*'|"[^"]*")\s*(?:,\s*\w+\s*)?\))"""
_RIGHT = re.compile(rf"\s*(?P<op>==|!=|<=|>=|<(?!=)|>(?!=))\s*(?P<operand>{_OPERAND})", re.VERBOSE)
_LEFT = re.compile(rf"(?P<operand>{_OPERAND})\s*(?P<op>==|!=|<=|>=|<|>)\s*$", re.VERBOSE)
_STRING_METHOD = re.compile(
    r"""\s*\.\s*(?P<method>startsWith|endsWith|contains|matches|lowerAscii|upperAscii)\s*\(
        \s*(?P<arg>'[^']*'|"[^"]*")?""",
    re.VERBOSE,
)
_DRIVER = re.compile(r"""\bdevice\s*\.\s*driver\s*==\s*(['"])(?P<driver>[^'"]+)\1""")
_LEFT_WINDOW = 256  # operands are short literals; keeps long expressions linear
_MIRROR = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}


@dataclass(frozen=True)
class Access:
    """`device.attributes['domain'].name` (or `device.capacity[...]`) found in an expression."""

    start: int
    end: int
    text: str
    field: str  # attributes | capacity
    key: str  # what is inside the brackets
    ident: str | None  # the id after it (`.name` or `['name']`), None when absent

    @property
    def qualified(self) -> bool:
        """The key is a domain (has a dot, no slash), as CEL requires."""
        return "." in self.key and "/" not in self.key

    @property
    def domain(self) -> str:
        """The domain this lookup reads: the key, or the part of `domain/name` before `/`."""
        if "/" in self.key:
            return self.key.partition("/")[0]
        return self.key if "." in self.key else ""

    @property
    def name(self) -> str | None:
        """The attribute or capacity name read, wherever the author put it."""
        if self.qualified:
            return self.ident
        if "/" in self.key:
            return self.key.partition("/")[2] or None
        return self.key or None

    def rewritten(self, domain: str) -> str:
        """The correct form of this lookup, reading `name` from `domain`."""
        base = f"device.{self.field}['{domain}']"
        return f"{base}.{self.name}" if self.name else base


@dataclass(frozen=True)
class Comparison:
    """An operator applied directly to an access: `<access> >= '550'` or `'550' <= <access>`."""

    op: str  # normalized as if the access were on the left
    operand: str
    text: str  # the whole comparison as written


@dataclass(frozen=True)
class StringCall:
    method: str
    arg: str | None
    text: str


def string_spans(text: str) -> list[tuple[int, int]]:
    """Start and end offsets of every string literal (quotes, triple quotes, raw strings)."""
    spans: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] not in "'\"":
            i += 1
            continue
        raw = (
            i > 0
            and text[i - 1] in "rR"
            and (i < 2 or not (text[i - 2].isalnum() or text[i - 2] == "_"))
        )
        quote = text[i : i + 3] if text[i : i + 3] in ("'''", '"""') else text[i]
        j = i + len(quote)
        while j < n:
            if not raw and text[j] == "\\":
                j += 2
                continue
            if text.startswith(quote, j):
                j += len(quote)
                break
            j += 1
        spans.append((i, min(j, n)))
        i = j
    return spans


def accesses(expression: str) -> Iterator[Access]:
    """Every `device.attributes[...]` / `device.capacity[...]` lookup outside string literals."""
    spans = string_spans(expression)
    starts = [a for a, _ in spans]
    for match in _ACCESS.finditer(expression):
        k = bisect.bisect_right(starts, match.start()) - 1
        if k >= 0 and match.start() < spans[k][1]:
            continue  # inside a string literal
        yield Access(
            start=match.start(),
            end=match.end(),
            text=match.group(0),
            field=match.group("field"),
            key=match.group("key"),
            ident=match.group("ident") or match.group("ident2"),
        )


def comparison(expression: str, access: Access) -> Comparison | None:
    """The comparison operator applied directly to `access`, on either side, if any."""
    right = _RIGHT.match(expression, access.end)
    if right is not None:
        return Comparison(right.group("op"), right.group("operand"), access.text + right.group(0))
    left = _LEFT.search(expression, max(0, access.start - _LEFT_WINDOW), access.start)
    if left is not None:
        op = _MIRROR[left.group("op")]
        return Comparison(op, left.group("operand"), left.group(0) + access.text)
    return None


def string_call(expression: str, access: Access) -> StringCall | None:
    """A string method called on `access` (`.startsWith('550')`), if any."""
    match = _STRING_METHOD.match(expression, access.end)
    if match is None:
        return None
    return StringCall(match.group("method"), match.group("arg"), access.text + match.group(0))


def drivers_named(expression: str) -> list[str]:
    """Drivers the expression pins with `device.driver == '...'`."""
    return [m.group("driver") for m in _DRIVER.finditer(expression)]


def is_string_literal(operand: str) -> bool:
    return operand[:1] in ("'", '"')


def literal_value(operand: str) -> str | None:
    """The text of a string or number literal, or of the argument of `semver('x')`-style calls."""
    operand = operand.strip()
    if is_string_literal(operand):
        return operand[1:-1]
    if re.fullmatch(r"-?\d+(?:\.\d+)?[uU]?", operand):
        return operand.rstrip("uU")
    call = re.fullmatch(r"""\w+\s*\(\s*(['"])(?P<arg>[^'"]*)\1.*\)""", operand, re.DOTALL)
    return call.group("arg") if call else None


def has_guard(expression: str, domain: str, name: str) -> bool:
    """`'name' in device.attributes['domain']` or `has(device.attributes['domain'].name)`."""
    d, n = re.escape(domain), re.escape(name)
    lookup = rf"""device\s*\.\s*attributes\s*\[\s*['"]{d}['"]\s*\]"""
    return bool(
        re.search(rf"""['"]{n}['"]\s+in\s+{lookup}""", expression)
        or re.search(rf"""\bhas\s*\(\s*{lookup}\s*\.\s*{n}\s*\)""", expression)
    )


def has_type_guard(expression: str, device_type: str) -> bool:
    """The expression tests `... .type == '<device_type>'` (NVIDIA's device kind)."""
    t = re.escape(device_type)
    return bool(re.search(rf"""\.\s*type\s*==\s*['"]{t}['"]""", expression))


def normalize_version(text: str) -> str:
    """`550` -> `550.0.0`, `v12.4` -> `12.4.0`; left alone when it is not dotted numbers."""
    core = text.strip().removeprefix("v")
    parts = core.split(".")
    if 1 <= len(parts) <= 3 and all(p.isdigit() for p in parts):
        return ".".join(parts + ["0"] * (3 - len(parts)))
    return text
