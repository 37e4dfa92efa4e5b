"""Legacy resource requests still written in a manifest's text, found without parsing it.

`dragate migrate --check` must fail while any legacy request is left, including those it could
not rewrite: a Helm template it cannot read, a templated count, an unknown kind, a `values.yaml`.
So the last word is a text scan, which needs no YAML: a resource name as a mapping key (plain,
quoted, or inside a JSON string such as Argo's `podSpecPatch`), outside `#` comments and
template actions. A name as a value (a toleration's `key: nvidia.com/gpu`, a device plugin's
`resourceName:`) asks for nothing and is not counted; nor is a node label that only starts
like one (`nvidia.com/gpu.product:`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
_KEY_END = re.compile(r"""\\?["']?\s*:(?:\s|$|[0-9"'{\[])""")
_ACTION = re.compile(r"\{\{(?:(?!\}\}).)*\}\}", re.DOTALL)


@dataclass(frozen=True)
class Leftover:
    """One legacy request in the text: its 1-based line, name, and whether its value is a
    template placeholder."""

    line: int
    name: str
    templated: bool


def find_leftovers(
    text: str, legacy: Callable[[str], bool], markers: tuple[str, ...]
) -> list[Leftover]:
    """Each legacy resource key in `text`: `markers` are substrings one of which every legacy
    name holds (a quick filter), `legacy` decides a whole name."""
    blanked = _ACTION.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    found = []
    for number, (line, raw) in enumerate(
        zip(blanked.split("\n"), text.split("\n"), strict=True), start=1
    ):
        if not any(marker in line for marker in markers):
            continue
        content = _without_comment(line)
        for match in _NAME.finditer(content):
            end = _KEY_END.match(content, match.end())
            if end and legacy(match.group(0)):
                templated = "{{" in raw[end.end() - 1 :]
                found.append(Leftover(number, match.group(0), templated))
    return found


def _without_comment(line: str) -> str:
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
