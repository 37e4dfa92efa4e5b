"""Helm and other Go-template manifests (`{{ ... }}`): what `dragate migrate` can do with them.

A placeholder inside a scalar value (`image: {{ .Values.image }}`, `"--name={{.Name}}"`) leaves
the YAML around it intact, so the file can be migrated with each placeholder standing in as an
opaque token and put back afterwards, byte for byte. A placeholder that makes structure (a line
of its own such as `{{- if .Values.gpu }}` or `{{ toYaml .Values.resources | nindent 12 }}`
outside a block scalar, or one inside a key) means the YAML only exists after rendering: such a
file is a template file, and is skipped with a message rather than reported as broken YAML.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from webhook.types import JSON

_PLACEHOLDER = re.compile(r"\{\{.*?\}\}", re.DOTALL)
_BLOCK_SCALAR = re.compile(r"(?:^|[:\-]\s)\s*[|>][-+0-9]*\s*(?:#.*)?$")


class TemplateFile(Exception):
    """The text is a template whose YAML exists only once rendered."""


@dataclass
class Masked:
    """The text with every placeholder replaced by a token, and the way back."""

    text: str
    originals: dict[str, str] = field(default_factory=dict)

    def unmask(self, text: str) -> str:
        for token, original in self.originals.items():
            text = text.replace(token, original)
        return text


def has_placeholders(text: str) -> bool:
    return "{{" in text and _PLACEHOLDER.search(text) is not None


def mask(text: str) -> Masked:
    """`text` with each placeholder as a token; raises TemplateFile for a structural one."""
    structural = _structural_line(text)
    if structural is not None:
        raise TemplateFile(f"line {structural} is a template directive")
    masked = Masked(text)
    prefix = _unused_prefix(text)

    def token(match: re.Match[str]) -> str:
        name = f"{prefix}{len(masked.originals)}x"
        masked.originals[name] = match.group(0)
        return name

    masked.text = _PLACEHOLDER.sub(token, text)
    return masked


def _unused_prefix(text: str) -> str:
    prefix = "dragatetpl"
    while prefix in text:
        prefix += "q"
    return prefix


def _structural_line(text: str) -> int | None:
    """The 1-based line of the first placeholder standing alone outside a block scalar."""
    for number, line in _outside_block_scalars(text):
        stripped = line.strip()
        if stripped.startswith("{{") and _PLACEHOLDER.sub("", stripped).strip() == "":
            return number
    return None


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
