"""Editing a YAML document's text around the changed nodes only.

A reviewer of `dragate migrate`'s diff must see only the GPU lines change. Re-rendering a whole
document with ruamel applies one indentation to every block (people mix `- ` at the key's column
and two spaces in), and drops trailing whitespace and layout details. So the change is applied
to the text itself: each changed mapping entry or sequence item is cut out by its lines, and
new entries are rendered alone, at the column and in the indentation style of the block they
join. Every line outside those entries stays byte for byte. Anything this cannot place (a root
in flow style, merge keys, an entry sharing its line with a `- ` it cannot keep) returns None,
and the caller falls back to rendering the document whole.

Relies on (checked with ruamel.yaml 0.19.1; canaries: tests/canary/test_ruamel.py):
- `ruamel.yaml.comments.CommentedBase.lc`: `lc.key(k)` and `lc.item(i)`, 0-based (line, column) of a
  key and of an item's content.
- `ruamel.yaml.comments.CommentedBase.fa.flow_style()`: flow collections are not edited.
- `ruamel.yaml.YAML.dump of a lone scalar`: ends with an explicit `...` line.
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from webhook.files.legacyscan import without_comment
from webhook.files.rtyaml import remembered
from webhook.files.treepatch import to_node
from webhook.types import JSON

_LOCAL = threading.local()
Step = str | int
Pointer = tuple[Step, ...]


@dataclass(frozen=True)
class Op:
    """`set` (add or replace a mapping entry), `remove`, or `append` (items to a sequence)."""

    kind: str
    path: Pointer
    value: JSON = None


@dataclass(frozen=True)
class Style:
    """A block's indentation: mapping step, and a sequence's dash and content columns."""

    mapping: int = 2
    dash: int = 0
    content: int = 2


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    lines: tuple[str, ...]


class Unplaceable(Exception):
    """The change cannot be written as a local text edit."""


def patch_text(body: str, node: Any, old: JSON, new: JSON) -> str | None:
    """`body` with the changes from `old` to `new` spliced in, or None when they cannot be."""
    if not isinstance(node, CommentedMap) or node.fa.flow_style():
        return None
    try:
        lines = body.splitlines(keepends=True)
        missing = "" if not lines or lines[-1].endswith("\n") else _eol(lines[0])
        if missing:  # the final newline the file lacks, for the edit; taken off again below
            lines[-1] += missing
        ops = _escalated(node, diff(old, new), new)
        edits = sorted((_edit(lines, node, op) for op in ops), key=lambda e: (e.start, e.end))
        text = _applied(lines, _comments_carried(lines, edits))
        return text[: -len(missing)] if missing and text.endswith(missing) else text
    except (Unplaceable, KeyError, IndexError, TypeError, AttributeError, ValueError):
        return None


def diff(old: JSON, new: JSON, path: Pointer = ()) -> list[Op]:
    """The changes from `old` to `new` as entry-level ops (no moves, no item renumbering)."""
    if isinstance(old, dict) and isinstance(new, dict) and (new or not old):
        ops = [Op("remove", (*path, k)) for k in old if k not in new]
        for key, value in new.items():
            if key not in old:
                ops.append(Op("set", (*path, key), value))
            elif old[key] != value:
                ops.extend(_changed(old[key], value, (*path, key)))
        return ops
    if isinstance(old, list) and isinstance(new, list) and old and len(new) >= len(old):
        if len(new) > len(old) and new[: len(old)] == old:
            return [Op("append", path, new[len(old) :])]
        if len(new) == len(old) and all(isinstance(v, dict) for v in (*old, *new)):
            return [
                op
                for i, (a, b) in enumerate(zip(old, new, strict=True))
                if a != b
                for op in diff(a, b, (*path, i))
            ]
    raise Unplaceable(path)


def _changed(old: JSON, new: JSON, path: Pointer) -> list[Op]:
    try:
        return diff(old, new, path)
    except Unplaceable:
        if isinstance(path[-1], int):
            raise
        return [Op("set", path, new)]


def _escalated(root: CommentedMap, ops: list[Op], new: JSON) -> list[Op]:
    """Ops inside flow collections become a `set` of the block entry that holds the flow."""
    out: list[Op] = []
    for found in ops:
        flow = _flow_prefix(root, found.path if found.kind != "append" else (*found.path, 0))
        op = found if flow is None or flow == found.path else Op("set", flow, _value_at(new, flow))
        if not any(_covers(done, op) for done in out):
            out = [o for o in out if not _covers(op, o)] + [op]
    return out


def _covers(outer: Op, inner: Op) -> bool:
    return outer.kind == "set" and inner.path[: len(outer.path)] == outer.path


def _flow_prefix(root: CommentedMap, path: Pointer) -> Pointer | None:
    """The path of the first entry (a mapping key) whose value is a flow collection. An empty
    collection is one whatever its recorded style: `{}` and `[]` are its only spellings."""
    node: Any = root
    for depth, step in enumerate(path[:-1]):
        node = node[step]
        if isinstance(node, (CommentedMap, CommentedSeq)) and (not node or node.fa.flow_style()):
            keys = [i for i in range(depth + 1) if not isinstance(path[i], int)]
            return path[: keys[-1] + 1]
    return None


def _value_at(data: JSON, path: Pointer) -> JSON:
    for step in path:
        data = data[step]
    return data


def _edit(lines: list[str], root: CommentedMap, op: Op) -> Edit:
    parent = _value_at(root, op.path[:-1]) if op.kind != "append" else None
    if op.kind == "append":
        return _append(lines, root, op)
    if not isinstance(parent, CommentedMap) or parent.fa.flow_style() or not parent:
        raise Unplaceable(op.path)
    key = op.path[-1]
    if key in parent:
        return _replace(lines, root, parent, op)
    return _insert(lines, root, parent, op)


def _replace(lines: list[str], root: CommentedMap, parent: CommentedMap, op: Op) -> Edit:
    """Remove or overwrite one entry: its lines go, a `set` puts the new entry there."""
    line, col = parent.lc.key(op.path[-1])
    end = _entry_end(lines, line, col, parent[op.path[-1]])
    prefix = lines[line][:col]
    if op.kind == "remove":
        if prefix.strip():
            raise Unplaceable(op.path)  # `- key:` would lose its dash
        return Edit(line, end, ())
    rendered = _render(op.path[-1], op.value, _style(root, op.path[:-1], lines))
    return Edit(line, end, _placed(rendered, prefix, col, _eol(lines[line])))


def _insert(lines: list[str], root: CommentedMap, parent: CommentedMap, op: Op) -> Edit:
    """A new entry after the mapping's last one (`metadata` before its first)."""
    keys = list(parent)
    first_line, col = parent.lc.key(keys[0])
    if op.kind == "remove":
        raise Unplaceable(op.path)
    rendered = _render(op.path[-1], op.value, _style(root, op.path[:-1], lines))
    if op.path[-1] == "metadata" and not lines[first_line][:col].strip():
        return Edit(
            first_line, first_line, _placed(rendered, " " * col, col, _eol(lines[first_line]))
        )
    last_line, _ = parent.lc.key(keys[-1])
    end = _entry_end(lines, last_line, col, parent[keys[-1]])
    return Edit(end, end, _placed(rendered, " " * col, col, _eol(lines[end - 1])))


def _append(lines: list[str], root: CommentedMap, op: Op) -> Edit:
    seq = _value_at(root, op.path)
    if not isinstance(seq, CommentedSeq) or seq.fa.flow_style() or not seq:
        raise Unplaceable(op.path)
    item_line, content = seq.lc.item(len(seq) - 1)
    dash = lines[item_line].rfind("-", 0, content)
    if dash < 0:
        raise Unplaceable(op.path)
    end = _item_end(lines, item_line, dash)
    style = _style(root, op.path, lines)
    out: list[str] = []
    eol = _eol(lines[end - 1])
    for value in op.value if isinstance(op.value, list) else []:
        rendered = _render_value(value, style)
        lead = " " * dash + "-" + " " * (content - dash - 1)
        out.extend(_placed(rendered, lead, content, eol))
    return Edit(end, end, tuple(out))


def _placed(rendered: tuple[str, ...], prefix: str, col: int, eol: str) -> tuple[str, ...]:
    """Rendered lines at column `col`, the first behind `prefix` (a `- ` it shares a line with)."""
    return tuple((prefix if i == 0 else " " * col) + text + eol for i, text in enumerate(rendered))


def _eol(line: str) -> str:
    return "\r\n" if line.endswith("\r\n") else "\n"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_filler(line: str) -> bool:
    text = line.strip()
    return not text or text.startswith("#")


def _entry_end(lines: list[str], start: int, col: int, value: Any) -> int:
    return entry_end(lines, start, col, isinstance(value, CommentedSeq))


def entry_end(lines: list[str], start: int, col: int, dash_ok: bool) -> int:
    """One past the last line of the mapping entry whose key sits at (`start`, `col`);
    `dash_ok`: its value is a block sequence, whose `- ` may sit at the key's column."""
    end = start + 1
    for index in range(start + 1, len(lines)):
        line = lines[index]
        if _is_filler(line) or _indent(line) > col:
            continue
        body = line[col:]
        if _indent(line) == col and dash_ok and (body.startswith("- ") or body.rstrip() == "-"):
            end = index + 1
            continue
        break
    else:
        return _trimmed(lines, start, len(lines))
    return _trimmed(lines, start, index if end <= index else end)


def _item_end(lines: list[str], start: int, dash: int) -> int:
    for index in range(start + 1, len(lines)):
        if not _is_filler(lines[index]) and _indent(lines[index]) <= dash:
            return _trimmed(lines, start, index)
    return _trimmed(lines, start, len(lines))


def _trimmed(lines: list[str], start: int, end: int) -> int:
    """`end` moved back over blank and comment lines: they belong to what follows."""
    while end > start + 1 and _is_filler(lines[end - 1]):
        end -= 1
    return end


def _style(root: CommentedMap, path: Pointer, lines: list[str]) -> Style:
    """The indentation of the nearest blocks around `path`, innermost first."""
    chain: list[Any] = [root]
    for step in path:
        chain.append(chain[-1][step])
    mapping = next((m for n in reversed(chain) if (m := _map_step(n)) is not None), 2)
    seq = next((s for n in reversed(chain) if (s := _seq_style(n, lines)) is not None), (0, 2))
    return Style(mapping, *seq)


def document_style(root: Any, body: str) -> Style | None:
    """The first block mapping step and block sequence style met in a document, breadth first:
    how a new document beside it should be indented."""
    if not isinstance(root, CommentedMap):
        return None
    mapping, seq = measured(root, body)
    dash, content = seq or (0, 2)
    return Style(mapping or 2, dash, content)


def measured(root: Any, body: str) -> tuple[int | None, tuple[int, int] | None]:
    """The mapping step and the sequence (dash, content) columns the document shows, breadth
    first; None for what it shows none of."""
    lines = body.splitlines(keepends=True)
    mapping: int | None = None
    seq: tuple[int, int] | None = None
    queue: list[Any] = [root]
    while queue and (mapping is None or seq is None):
        node = queue.pop(0)
        mapping = mapping if mapping is not None else _map_step(node)
        seq = seq if seq is not None else _seq_style(node, lines)
        children = node.values() if isinstance(node, dict) else node
        queue.extend(c for c in children if isinstance(c, (CommentedMap, CommentedSeq)))
    return mapping, seq


def render_document(obj: JSON, style: Style) -> str:
    return "\n".join(_dump(obj, style)) + "\n"


def _map_step(node: Any) -> int | None:
    if not isinstance(node, CommentedMap) or node.fa.flow_style():
        return None
    for key, value in node.items():
        if isinstance(value, CommentedMap) and value and not value.fa.flow_style():
            child = value.lc.key(next(iter(value)))[1]
            if child > node.lc.key(key)[1]:
                return int(child - node.lc.key(key)[1])
    return None


def _seq_style(node: Any, lines: list[str]) -> tuple[int, int] | None:
    if not isinstance(node, CommentedMap) or node.fa.flow_style():
        return None
    for key, value in node.items():
        if isinstance(value, CommentedSeq) and value and not value.fa.flow_style():
            line, content = value.lc.item(0)
            dash = lines[line].rfind("-", 0, content)
            col = node.lc.key(key)[1]
            if dash >= col and content > dash:
                return int(dash - col), int(content - col)
    return None


def _render(key: Step, value: JSON, style: Style) -> tuple[str, ...]:
    return _dump({str(key): value}, style)


def _render_value(value: JSON, style: Style) -> tuple[str, ...]:
    """An item's text, its first line to follow `- ` (nested lines relative to the content)."""
    return _dump(value, style)


def _dump(value: JSON, style: Style) -> tuple[str, ...]:
    return remembered("lines", value, style, lambda: _dumped(to_node(value), style))


def _dumped(node: Any, style: Style) -> tuple[str, ...]:
    cache: dict[Style, YAML] = _LOCAL.__dict__.setdefault("dumpers", {})
    yaml = cache.pop(style, None) or _dumper(style)  # not put back if the dump fails
    buffer = io.StringIO()
    yaml.dump(node, buffer)
    cache[style] = yaml
    text = buffer.getvalue()
    if text.endswith("...\n"):  # a lone scalar: ruamel ends the document explicitly
        text = text[: -len("...\n")]
    return tuple(text.rstrip("\n").split("\n"))


def _dumper(style: Style) -> YAML:
    """Building a YAML object costs as much as a small dump: one per style and thread."""
    yaml = YAML(typ="rt", pure=True)
    yaml.width = 4096
    sequence = max(style.content, style.dash + 2)
    yaml.indent(mapping=style.mapping, sequence=sequence, offset=style.dash)
    return yaml


def _comments_carried(lines: list[str], edits: list[Edit]) -> list[Edit]:
    """Each edit with the end-of-line comments of the lines it removes (`nvidia.com/gpu: 2  #
    two GPUs`) put on the lines that replace them, at the same place in the block: its own
    lines, or those an edit inserts right where it ends."""
    out = list(edits)
    for index, edit in enumerate(out):
        comments = [
            (i - edit.start, c) for i in range(edit.start, edit.end) if (c := _comment(lines[i]))
        ]
        target = (
            index
            if edit.lines
            else next(
                (
                    j
                    for j, other in enumerate(out)
                    if other.start == other.end == edit.end and other.lines
                ),
                None,
            )
        )
        if not comments or target is None:
            continue
        new = list(out[target].lines)
        for at, comment in comments:
            where = min(at, len(new) - 1)
            body = new[where].rstrip("\r\n")
            new[where] = f"{body}  {comment}{new[where][len(body) :]}"
        out[target] = Edit(out[target].start, out[target].end, tuple(new))
    return out


def _comment(line: str) -> str:
    """The comment ending a line that holds an entry ("" for none, and for a comment line)."""
    text = line.rstrip("\r\n")
    content = without_comment(text)
    return text[len(content) :].strip() if content.strip() else ""


def _applied(lines: list[str], edits: list[Edit]) -> str:
    out: list[str] = []
    at = 0
    for edit in edits:
        if edit.start < at:
            raise Unplaceable("overlapping edits")
        out.extend(lines[at : edit.start])
        out.extend(edit.lines)
        at = max(at, edit.end)
    out.extend(lines[at:])
    return "".join(out)
