"""Reading YAML and JSON text into plain values that remember where they came from.

Policies, manifests and lint findings all need `file:line` in their messages, and the pure
layers must never see ruamel types; so documents are parsed once with ruamel's round-trip loader
(which keeps positions), turned into plain dicts and lists, and keep the ruamel tree only as a
locator for error messages. Plain text (`webhook.files.plainyaml`) is read by libyaml instead,
to the same data and positions, many times faster (docs/benchmarks.md).

Relies on (checked with ruamel.yaml 0.19.1; canaries: tests/canary/test_ruamel.py):
- `ruamel.yaml.comments.CommentedBase.lc`: `lc.key`, `lc.item` and `lc.line` for positions.
- `ruamel.yaml.error.MarkedYAMLError marks`: problem_mark/context_mark lines, problem.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from webhook.files.aliases import check_alias_growth
from webhook.files.plainyaml import Located, PlainDocument, read_plain
from webhook.types import JSON, DragateError, Source

MAX_TEXT_BYTES = 16 * 1024 * 1024
"""Larger inputs are refused: nothing a person keeps in git as one manifest is that big."""


class YamlError(DragateError):
    """Text that is not valid YAML or JSON; carries the position of the first problem."""

    def __init__(self, source: Source, message: str) -> None:
        super().__init__(f"{source}: {message}")
        self.source = source
        self.message = message


@dataclass(frozen=True)
class Document:
    """One YAML document as plain data, with a way back to its lines."""

    data: JSON
    source: Source
    index: int = 0
    node: Any = field(default=None, compare=False, repr=False)

    def line_of(self, path: Sequence[str | int]) -> int:
        """The 1-based line of the value at `path`, or of its nearest existing parent."""
        line, node = self.source.line, self.node
        for step in path:
            found = _child_line(node, step)
            if found is None:
                break
            line, node = found
        return line

    def source_of(self, path: Sequence[str | int]) -> Source:
        return Source(self.source.file, self.line_of(path))


def _child_line(node: Any, step: str | int) -> tuple[int, Any] | None:
    if isinstance(node, Located):
        at = node.at.get(step)
        return None if at is None else (at[0] + 1, node[step])
    if isinstance(node, CommentedMap) and isinstance(step, str) and step in node:
        return node.lc.key(step)[0] + 1, node[step]
    if isinstance(node, CommentedSeq) and isinstance(step, int) and 0 <= step < len(node):
        return node.lc.item(step)[0] + 1, node[step]
    return None


def parse_documents(text: str, file: str) -> list[Document]:
    """Every non-empty document of `text`; raises YamlError naming the line of the problem."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise YamlError(Source(file), f"larger than {MAX_TEXT_BYTES // (1024 * 1024)} MiB")
    plain = read_plain(text)
    if plain is not None:
        return [
            Document(doc.data, Source(file, _plain_line(doc)), index, doc.located)
            for index, doc in enumerate(plain)
            if doc.data is not None
        ]
    try:
        return list(_documents(text, file))
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else 0
        raise YamlError(Source(file, line), _describe(err)) from None
    except (YAMLError, RecursionError, ValueError) as err:
        raise YamlError(Source(file), f"not valid YAML or JSON: {err}") from None


def _documents(text: str, file: str) -> Iterator[Document]:
    loader = YAML(typ="rt", pure=True)
    for index, node in enumerate(loader.load_all(text)):
        if node is None:
            continue
        check_alias_growth(node)  # a ValueError: refused before any copy is made
        yield Document(to_plain(node), Source(file, _start_line(node)), index, node)


def _plain_line(doc: PlainDocument) -> int:
    """As `_start_line`: a collection's first line, 1 for a scalar (ruamel keeps no line)."""
    return doc.line + 1 if doc.located is not None else 1


def _start_line(node: Any) -> int:
    lc = getattr(node, "lc", None)
    return int(lc.line) + 1 if lc is not None and lc.line is not None else 1


def _describe(err: MarkedYAMLError) -> str:
    problem = err.problem or str(err).splitlines()[0]
    return f"not valid YAML or JSON: {err.context + ', ' if err.context else ''}{problem}"


def to_plain(node: Any) -> JSON:
    """ruamel's round-trip containers and scalars as builtin dicts, lists, str, int, float."""
    if isinstance(node, dict):
        return {str(k): to_plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [to_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    for plain in (int, float):
        if isinstance(node, plain):
            return plain(node)
    return str(node)  # strings; timestamps and other tagged scalars as text, as kubectl sends
