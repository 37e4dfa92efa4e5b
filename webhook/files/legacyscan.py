"""Legacy resource requests still written in a manifest's text, found without parsing it.

`dragate migrate --check` must fail while any legacy request is left, including those it could
not rewrite: a Helm template it cannot read, a templated count, an unknown kind, a `values.yaml`.
So the last word is a text scan, which needs no YAML, outside `#` comments:

- a resource name as a mapping key (plain, quoted, or inside a JSON string such as Argo's
  `podSpecPatch`): a request;
- a resource name as a whole scalar value (`nvidiaResource: nvidia.com/gpu`, which a chart then
  turns into a key), except where it names no request: a toleration's or node selector term's
  `key:`, a device plugin's `resourceName:` or `name:`, dragate's own annotations;
- a string literal in a template action (`{{- $limit := dict (... | default "nvidia.com/gpu") }}`,
  `printf "nvidia.com/mig-%s"`), unless the line is a `key:`;
- a string literal a template action looks up in a map (`index .Values.resources.limits
  "nvidia.com/gpu"`, `hasKey`, `get`): a read of the count (form `read`), no request.

A node label that only starts like one (`nvidia.com/gpu.product:`) is not a resource name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
_KEY_END = re.compile(r"""\\?["']?\s*:(?:\s|$|[0-9"'{\[])""")
_ACTION = re.compile(r"\{\{(?:(?!\}\}).)*\}\}", re.DOTALL)
_LITERAL = re.compile(r'"([A-Za-z0-9][A-Za-z0-9._/%-]*)"')
_LOOKUP = re.compile(r"\b(?:index|hasKey|get)\s+[$.\w]+\s+$")
_VALUE = re.compile(
    r"""^\s*(?:-\s+)?(["']?)([^"'\s:#][^:#]*?)\1\s*:\s+(["']?)([A-Za-z0-9][\w./-]*)\3\s*$"""
)
_LINE_KEY = re.compile(r"""^\s*(?:-\s+)?["']?([^"'\s:#][^:#]*?)["']?\s*:(?:\s|$)""")
NOT_REQUESTS = frozenset({"key", "resourceName", "name"})


@dataclass(frozen=True)
class Leftover:
    """One legacy request in the text: its 1-based line, name, and how it is written: `key`,
    `value` (of the key `holder`) or `expression`; `templated` when its value is a placeholder.
    Form `read` is no request: a template reading the count."""

    line: int
    name: str
    form: str = "key"
    templated: bool = False
    holder: str = ""


def find_leftovers(
    text: str, legacy: Callable[[str], bool], markers: tuple[str, ...]
) -> list[Leftover]:
    """Each legacy resource request in `text`: `markers` are substrings one of which every
    legacy name holds (a quick filter), `legacy` decides a whole name."""
    blanked = _ACTION.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    found: list[Leftover] = []
    lines = zip(blanked.split("\n"), text.split("\n"), strict=True)
    for number, (line, raw) in enumerate(lines, start=1):
        if any(marker in raw for marker in markers):
            found.extend(_in_line(number, without_comment(line), raw, legacy))
    return found


def _in_line(number: int, content: str, raw: str, legacy: Callable[[str], bool]) -> list[Leftover]:
    found = []
    for match in _NAME.finditer(content):
        end = _KEY_END.match(content, match.end())
        if end and legacy(match.group(0)):
            templated = "{{" in raw[end.end() - 1 :]
            found.append(Leftover(number, match.group(0), "key", templated))
    value = _VALUE.match(content)
    if value and legacy(value.group(4)) and _asks(value.group(2)):
        found.append(Leftover(number, value.group(4), "value", holder=value.group(2)))
    key = _LINE_KEY.match(content)
    if key is None or _asks(key.group(1)):
        for action in _ACTION.findall(without_comment(raw)):
            found.extend(_in_action(number, action, legacy))
    return found


def _in_action(number: int, action: str, legacy: Callable[[str], bool]) -> list[Leftover]:
    found = []
    for literal in _LITERAL.finditer(action):
        name = literal.group(1)
        if legacy(name.split("%")[0]):
            read = _LOOKUP.search(action, 0, literal.start()) is not None
            found.append(Leftover(number, name, "read" if read else "expression"))
    return found


def _asks(key: str) -> bool:
    return key not in NOT_REQUESTS and not key.startswith("dragate.io/")


def without_comment(line: str) -> str:
    """`line` up to a `#` that starts a comment (at the start or after a space, unquoted)."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'" and (index == 0 or line[index - 1] in " \t:[{,-"):
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index]
    return line
