"""Duplicate mapping keys, decided the way kubectl decides them: the last one wins.

ruamel refuses a document with a repeated key, and kubectl (`sigs.k8s.io/yaml`) silently keeps
the last value. A manifest that kubectl applies must not be "unreadable" to `dragate migrate`,
and its reader must be told: so each repeat is found with its line, the earlier entries are cut
from the text that is loaded, and the caller warns naming the key and both lines. The cut lines
are left empty rather than removed, so positions in what is loaded are positions in the file:
an edit elsewhere in the document leaves the repeated keys where they are.

Relies on (checked with ruamel.yaml 0.19.1; canaries: tests/canary/test_ruamel.py):
- `ruamel.yaml.YAML.compose(text)`: accepts repeated keys; MappingNode.value pairs and start_mark
  line/column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from webhook.files.textpatch import entry_end


@dataclass(frozen=True)
class Duplicate:
    """`key` at `line` (kept, 0-based in the document) repeats the one at `earlier` (cut)."""

    key: str
    line: int
    earlier: int
    earlier_col: int
    earlier_value: Node


def find_duplicates(body: str) -> list[Duplicate]:
    """Every repeated key in the document `body`, in text order."""
    node = YAML(typ="rt", pure=True).compose(body)
    found: list[Duplicate] = []
    _walk(node, found)
    return sorted(found, key=lambda d: d.earlier)


def _walk(node: Any, found: list[Duplicate]) -> None:
    if isinstance(node, MappingNode):
        seen: dict[str, tuple[ScalarNode, Node]] = {}
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.value in seen:
                first, first_value = seen[key.value]
                found.append(
                    Duplicate(
                        key.value,
                        key.start_mark.line,
                        first.start_mark.line,
                        first.start_mark.column,
                        first_value,
                    )
                )
            if isinstance(key, ScalarNode):
                seen[key.value] = (key, value)
            _walk(value, found)
    elif isinstance(node, SequenceNode):
        for item in node.value:
            _walk(item, found)


def without_earlier(body: str, duplicates: list[Duplicate]) -> str:
    """`body` with the earlier entry of each repeated key blanked: its lines stay, empty, so
    that every line number still matches `body`."""
    lines = body.splitlines(keepends=True)
    spans: list[tuple[int, int]] = []
    for dup in duplicates:
        if lines[dup.earlier][: dup.earlier_col].strip():
            raise ValueError(f"duplicate key {dup.key!r} shares its line with a `- `")
        is_seq = isinstance(dup.earlier_value, SequenceNode)
        end = entry_end(lines, dup.earlier, dup.earlier_col, is_seq)
        spans.append((dup.earlier, end))
    for start, end in spans:
        for index in range(start, end):
            line = lines[index]
            lines[index] = line[len(line.rstrip("\r\n")) :]  # its end of line only
    return "".join(lines)
