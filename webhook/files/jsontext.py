"""Editing a JSON manifest's text around the changed values only.

`dragate migrate` must leave a diff of GPU lines alone, and `json.dumps` of the whole file
reflows every compact array and object. So the text is scanned once with the offset of every
value, and each change is spliced in where it belongs: a replaced value in place, a removed
entry with its comma, a new entry or item before the container's first one (it brings its own
comma, so no existing line changes). New text follows the block it joins: one line when that
container (or the value it replaces) sat on one line, with the file's separators; otherwise
one entry per line at the container's own indentation step. Anything
this cannot place (an empty root, a value no scan reads) returns None, and the caller dumps the
file whole.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field

from webhook.files.textpatch import Op, Pointer, Unplaceable, diff
from webhook.types import JSON

_SPACE = " \t\r\n"
_DECODER = json.JSONDecoder()


@dataclass
class Span:
    """A value's place in the text: [start, end); containers also hold their children."""

    start: int
    end: int
    keys: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Object: key -> (offset of its opening quote, offset just past its closing quote)."""
    children: dict[str | int, Span] = field(default_factory=dict)


@dataclass(frozen=True)
class Text:
    """The file being patched, its scan, and the separators and line ending it uses."""

    text: str
    root: Span
    separators: tuple[str, str]
    eol: str


@dataclass(frozen=True)
class Splice:
    start: int
    end: int
    text: str


def patch_json(text: str, old: JSON, new: JSON) -> tuple[str, JSON] | None:
    """`text` with the changes from `old` to `new` spliced in, and the data it now holds (`new`
    with appended items first: see `_append`); None when the changes cannot be placed."""
    try:
        root = scan(text)
        doc = Text(text, root, _separators(text, root), "\r\n" if "\r\n" in text else "\n")
        ops = _paired(_lifted(diff(old, new), root, new), root)
        splices = sorted((_splice(doc, op) for op in ops), key=lambda s: (s.start, s.end))
        patched = _applied(text, splices)
        expected = _items_first(new, ops)
    except (Unplaceable, KeyError, IndexError, TypeError, ValueError, RecursionError):
        return None
    try:
        return (patched, expected) if json.loads(patched) == expected else None
    except (ValueError, RecursionError):
        return None


def wrap_in_list(text: str, objects: list[JSON], indent: int | None) -> str:
    """A single-object file as a `List` holding it and `objects`, its own lines unchanged.

    JSON has no document separator, so the templates must share a top-level value with the
    object. Moving the object into `items` one level deeper would re-indent every line of
    it; JSON does not care about indentation, so the object's lines stay as they are and only
    the `List` head line, one `, {` line per template and the closing `]}` are new.
    """
    eol = "\r\n" if "\r\n" in text else "\n"
    body = text.rstrip(_SPACE)
    out = ['{"apiVersion": "v1", "kind": "List", "items": [', eol, body]
    for obj in objects:
        rendered = json.dumps(obj, indent=indent, ensure_ascii=False).replace("\n", eol)
        out += [eol, ", ", rendered]
    out += [eol, "]}", text[len(body) :]]
    return "".join(out)


def scan(text: str, at: int = 0) -> Span:
    """The root value's span; raises ValueError for text that is not one JSON value."""
    span, end = _value(text, _skip(text, at))
    if _skip(text, end) != len(text):
        raise ValueError("extra data")
    return span


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _value(text: str, at: int) -> tuple[Span, int]:
    if text.startswith("{", at):
        return _object(text, at)
    if text.startswith("[", at):
        return _array(text, at)
    _, end = _DECODER.raw_decode(text, at)
    return Span(at, end), end


def _object(text: str, start: int) -> tuple[Span, int]:
    span = Span(start, start)
    at = _skip(text, start + 1)
    while not text.startswith("}", at):
        key, key_end = _DECODER.raw_decode(text, at)
        if not isinstance(key, str) or not text.startswith(":", _skip(text, key_end)):
            raise ValueError("not an object key")
        child, after = _value(text, _skip(text, _skip(text, key_end) + 1))
        span.keys[key], span.children[key] = (at, key_end), child
        at = _next(text, after, "}")
    span.end = at + 1
    return span, span.end


def _array(text: str, start: int) -> tuple[Span, int]:
    span = Span(start, start)
    at = _skip(text, start + 1)
    while not text.startswith("]", at):
        child, after = _value(text, at)
        span.children[len(span.children)] = child
        at = _next(text, after, "]")
    span.end = at + 1
    return span, span.end


def _next(text: str, after: int, close: str) -> int:
    at = _skip(text, after)
    if text.startswith(",", at) and not text.startswith(close, _skip(text, at + 1)):
        return _skip(text, at + 1)
    if text.startswith(close, at):
        return at
    raise ValueError("expected , or " + close)


def _at(root: Span, path: Pointer) -> Span:
    for step in path:
        root = root.children[step]
    return root


def _value_at(data: JSON, path: Pointer) -> JSON:
    for step in path:
        data = data[step]
    return data


def _lifted(ops: list[Op], root: Span, new: JSON) -> list[Op]:
    """Ops into an empty container, or removing its only entry, become a `set` of that
    container: no entry would be left to show where new ones go, or to take the comma."""
    out: list[Op] = []
    for found in ops:
        parent = found.path if found.kind == "append" else found.path[:-1]
        op = found
        alone = found.kind == "remove" and len(_at(root, parent).children) == 1
        if alone or not _at(root, parent).children:
            if not parent:
                raise Unplaceable(parent)
            op = Op("set", parent, _value_at(new, parent))
        if not any(_covers(done, op) for done in out):
            out = [o for o in out if not _covers(op, o)] + [op]
    return out


def _covers(outer: Op, inner: Op) -> bool:
    return outer.kind == "set" and inner.path[: len(outer.path)] == outer.path


def _paired(ops: list[Op], root: Span) -> list[Op]:
    """A removed last entry gives its place to an entry new in the same object (`limits` out,
    `claims` in): removing it alone would take the comma off the line before."""
    out = list(ops)
    for op in ops:
        parent = op.path[:-1]
        if op.kind != "remove" or list(_at(root, parent).keys)[-1] != op.path[-1]:
            continue
        partner = next(
            (
                o
                for o in out
                if o.kind == "set"
                and o.path[:-1] == parent
                and o.path[-1] not in _at(root, parent).keys
            ),
            None,
        )
        if partner is not None:
            out.remove(op)
            out[out.index(partner)] = Op("instead", partner.path, (op.path[-1], partner.value))
    return out


def _items_first(new: JSON, ops: list[Op]) -> JSON:
    """`new` as the splices leave it: appended items stand before the old ones."""
    data = copy.deepcopy(new)
    for op in ops:
        if op.kind == "append" and isinstance(op.value, list):
            items = _value_at(data, op.path)
            if isinstance(items, list):
                count = len(op.value)
                items[:] = items[-count:] + items[:-count]
    return data


def _splice(doc: Text, op: Op) -> Splice:
    if op.kind == "append":
        return _append(doc, op.path, op.value)
    parent = _at(doc.root, op.path[:-1])
    key = op.path[-1]
    if isinstance(key, int):
        raise Unplaceable(op.path)
    if op.kind == "remove":
        return _remove(parent, key)
    if op.kind == "instead" and isinstance(op.value, list | tuple):
        gone, value = op.value
        entry = _entry(doc, op.path, value, _line_indent(doc.text, parent.keys[gone][0]))
        return Splice(parent.keys[gone][0], parent.children[gone].end, entry)
    if key not in parent.children:
        return _insert(doc, op.path[:-1], key, op.value)
    old = parent.children[key]
    one_line = "\n" not in doc.text[old.start : old.end]
    indent = _line_indent(doc.text, old.start)
    return Splice(old.start, old.end, _render(doc, op.path[:-1], op.value, one_line, indent))


def _remove(parent: Span, key: str) -> Splice:
    """The entry and one comma: up to the next key, or from the previous value when last
    (that value's line then loses its comma: JSON allows no trailing one)."""
    names = list(parent.keys)
    index = names.index(key)
    if index + 1 < len(names):
        return Splice(parent.keys[key][0], parent.keys[names[index + 1]][0], "")
    if index == 0:
        raise Unplaceable((key,))
    return Splice(parent.children[names[index - 1]].end, parent.children[key].end, "")


def _insert(doc: Text, path: Pointer, key: str, value: JSON) -> Splice:
    """A new entry before the object's first one, laid out like it: the entry brings its own
    comma, so no line of the object changes (at the end, the last entry's line would)."""
    parent = _at(doc.root, path)
    first = next(iter(parent.keys.values()))[0]
    lead = _lead(doc, parent)
    entry = _entry(doc, (*path, key), value, lead.rpartition("\n")[2])
    return Splice(first, first, entry + "," + lead)


def _entry(doc: Text, path: Pointer, value: JSON, indent: str) -> str:
    parent = _at(doc.root, path[:-1])
    one_line = "\n" not in doc.text[parent.start : parent.end]
    rendered = _render(doc, path[:-1], value, one_line, indent)
    return json.dumps(path[-1], ensure_ascii=False) + doc.separators[1] + rendered


def _append(doc: Text, path: Pointer, values: JSON) -> Splice:
    """New items before the array's first one, laid out like it (their own commas keep every
    line of the array as it was; the order of claims, resource claims and `List` items does not
    matter to Kubernetes)."""
    parent = _at(doc.root, path)
    if not isinstance(values, list) or not parent.children:
        raise Unplaceable(path)
    first = next(iter(parent.children.values())).start
    lead = _lead(doc, parent)
    one_line = "\n" not in doc.text[parent.start : parent.end]
    indent = lead.rpartition("\n")[2]
    rendered = [_render(doc, path, value, one_line, indent) for value in values]
    return Splice(first, first, "".join(r + "," + lead for r in rendered))


def _lead(doc: Text, parent: Span) -> str:
    """What stands between the opening bracket and the container's first child; on one line,
    what follows the file's commas."""
    first = (
        next(iter(parent.keys.values()))[0]
        if parent.keys
        else next(iter(parent.children.values())).start
    )
    lead = doc.text[parent.start + 1 : first]
    return lead if "\n" in lead else doc.separators[0].removeprefix(",")


def _render(doc: Text, path: Pointer, value: JSON, one_line: bool, indent: str) -> str:
    """`value` as it reads in the container at `path`: on one line with the file's separators,
    or one entry per line, its nested lines indented from `indent` (its first line's)."""
    if one_line or not isinstance(value, (dict, list)) or not value:
        return json.dumps(value, ensure_ascii=False, separators=doc.separators)
    rendered = json.dumps(
        value, ensure_ascii=False, indent=_step(doc, path), separators=(",", doc.separators[1])
    )
    return rendered.replace("\n", doc.eol + indent)


def _line_indent(text: str, at: int) -> str:
    begin = text.rfind("\n", 0, at) + 1
    line = text[begin:at]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _step(doc: Text, path: Pointer) -> str:
    """The indentation one level adds, read from the nearest multi-line container up `path`."""
    for depth in range(len(path), -1, -1):
        span = _at(doc.root, path[:depth])
        starts = [k[0] for k in span.keys.values()] or [c.start for c in span.children.values()]
        if not starts or "\n" not in doc.text[span.start : starts[0]]:
            continue
        child, outer = _line_indent(doc.text, starts[0]), _line_indent(doc.text, span.start)
        if child.startswith(outer) and len(child) > len(outer):
            return child[len(outer) :]
    return "  "


def _separators(text: str, root: Span) -> tuple[str, str]:
    """The item and key separators the file's first entries use (`", "`, `": "` or tight)."""
    item, colon = ", ", ": "
    spans = _walk(root)
    for span in spans:
        if span.keys:
            first = next(iter(span.keys))
            gap = text[span.keys[first][1] : span.children[first].start]
            colon = gap if "\n" not in gap else colon
            break
    for span in spans:
        starts = [k[0] for k in span.keys.values()] or [c.start for c in span.children.values()]
        if len(starts) > 1 and "\n" not in text[span.start : span.end]:
            first_end = next(iter(span.children.values())).end
            item = text[first_end : starts[1]]
            break
    return item, colon


def _walk(span: Span) -> list[Span]:
    out = [span]
    for child in span.children.values():
        out.extend(_walk(child))
    return out


def _applied(text: str, splices: list[Splice]) -> str:
    out: list[str] = []
    at = 0
    for splice in splices:
        if splice.start < at:
            raise Unplaceable("overlapping edits")
        out += [text[at : splice.start], splice.text]
        at = splice.end
    out.append(text[at:])
    return "".join(out)
