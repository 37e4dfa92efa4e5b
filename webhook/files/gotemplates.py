"""Helm and other Go-template manifests (`{{ ... }}`): what `dragate migrate` can do with them.

A placeholder inside a scalar value (`image: {{ .Values.image }}`, `"--name={{.Name}}"`) leaves
the YAML around it intact, so the file is migrated with each placeholder standing in as an
opaque token and put back afterwards, byte for byte. A line that holds nothing but template
actions (`{{- if .Values.gpu }}`, `{{- end }}`, `{{- /* licence */ -}}`,
`{{ toYaml .Values.resources | nindent 12 }}`, even one spanning several lines) stands in as a
YAML comment, which the in-place editor keeps where it is; `webhook.files.helmblocks` then
checks that no edit moved such a line or crossed a template block. A placeholder inside a key,
or text that is not YAML with the placeholders standing in, makes a template file: it is
skipped with a message rather than reported as broken YAML.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from webhook.types import JSON

_PLACEHOLDER = re.compile(r"\{\{(?:(?!\}\}).)*\}\}", re.DOTALL)
_ACTION_LINE = re.compile(
    r"^[ \t]*(\{\{(?:(?!\}\}).)*\}\}(?:[ \t]*\{\{(?:(?!\}\}).)*\}\})*)[ \t]*$",
    re.DOTALL | re.MULTILINE,
)
_BLOCK_SCALAR = re.compile(r"(?:^|[:\-]\s)\s*[|>][-+0-9]*\s*(?:#.*)?$")


class TemplateFile(Exception):
    """The text is a template whose YAML exists only once rendered."""


@dataclass(frozen=True)
class Action:
    """A run of template actions standing alone on its line(s), and the comment it became."""

    line: int  # 1-based, where it starts
    original: str
    stand_in: str


@dataclass
class Masked:
    """The text with every placeholder replaced by a token, and the way back."""

    text: str
    originals: dict[str, str] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    prefix: str = "dragatetpl"

    def token(self, original: str) -> str:
        """The token standing for `original` in a scalar: the file's own, or a new one."""
        found = next((t for t, o in self.originals.items() if o == original), None)
        if found is None:
            found = f"{self.prefix}{len(self.originals) + len(self.actions)}y"
            self.originals[found] = original
        return found

    def unmask(self, text: str) -> str:
        for action in self.actions:
            text = text.replace(action.stand_in, action.original)
        for token, original in self.originals.items():
            text = text.replace(token, original)
        return text


def has_placeholders(text: str) -> bool:
    return "{{" in text and _PLACEHOLDER.search(text) is not None


def mask(text: str) -> Masked:
    """`text` with each action line as a comment and each other placeholder as a token."""
    prefix = _unused_prefix(text)
    masked = Masked(text, prefix=prefix)
    outside = {number for number, _ in _outside_block_scalars(text)}

    def action(match: re.Match[str]) -> str:
        line = text.count("\n", 0, match.start()) + 1
        if line not in outside:
            return match.group(0)
        name = f"#{prefix}{len(masked.originals) + len(masked.actions)}x"
        lines = match.group(1).count("\n")
        stand_in = "\n".join([name] + [f"{name}{i}" for i in range(1, lines + 1)])
        masked.actions.append(Action(line, match.group(1), stand_in))
        return match.group(0).replace(match.group(1), stand_in)

    def token(match: re.Match[str]) -> str:
        name = f"{prefix}{len(masked.originals) + len(masked.actions)}y"
        masked.originals[name] = match.group(0)
        return name

    masked.text = _PLACEHOLDER.sub(token, _ACTION_LINE.sub(action, text))
    return masked


def _unused_prefix(text: str) -> str:
    prefix = "dragatetpl"
    while prefix in text:
        prefix += "q"
    return prefix


def _outside_block_scalars(text: str) -> Iterator[tuple[int, str]]:
    block_indent: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        indent = len(line) - len(line.lstrip(" "))
        if block_indent is not None and (not line.strip() or indent > block_indent):
            continue
        block_indent = None
        yield number, line
        content = line.split(" #", 1)[0].rstrip()
        if _BLOCK_SCALAR.search(content) and "{{" not in content:
            block_indent = indent


def tokens_in_keys(data: JSON, masked: Masked) -> str | None:
    """The first placeholder that ended up in a mapping key, if any."""
    if isinstance(data, dict):
        for key, value in data.items():
            hit = next((o for t, o in masked.originals.items() if t in str(key)), None)
            found = hit or tokens_in_keys(value, masked)
            if found:
                return found
    elif isinstance(data, list):
        for item in data:
            found = tokens_in_keys(item, masked)
            if found:
                return found
    return None
