"""Editing manifests in place: comments, key order, quoting and layout kept.

`dragate migrate` changes a few keys in a few documents of files people maintain by hand, so
the diff it leaves must be just those keys. The text is cut into documents at their `---`
markers; a document that does not change is never re-rendered (byte-identical), and one that
does is patched (JSON-patch ops computed on plain data, applied to the ruamel tree) and dumped
alone with the file's own indentation. JSON files stay JSON, with their indent.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, MarkedYAMLError, YAMLError
from ruamel.yaml.tokens import CommentToken
from ruamel.yaml.util import load_yaml_guess_indent

from webhook.sources.yamlio import MAX_TEXT_BYTES, YamlError, to_plain
from webhook.types import JSON, Source

_MARKER = re.compile(r"^---(?=[ \t]|$)", re.MULTILINE)


@dataclass
class Doc:
    """One document: its `---` line(s) kept verbatim, its body, and both views of its data."""

    head: str
    body: str
    line: int
    node: Any = None
    data: JSON = None


@dataclass
class Stream:
    """A file's documents; `text()` gives it back with only the edited documents re-rendered."""

    file: str
    docs: list[Doc]
    json_indent: int | None = None
    is_json: bool = False
    trailing_newline: bool = True
    indent: tuple[int, int] = (2, 0)
    extra: list[str] = field(default_factory=list)
    indent_text: str | None = None
    """When set, `indent` is guessed from this text the first time it is needed (a full parse
    of the file, skipped for files whose documents do not change)."""

    @property
    def file_indent(self) -> tuple[int, int]:
        if self.indent_text is not None:
            self.indent, self.indent_text = _guess_indent(self.indent_text, (2, 0)), None
        return self.indent

    def update(self, index: int, new: JSON) -> None:
        """Make document `index` hold `new`, touching only the keys that differ."""
        doc = self.docs[index]
        if self.is_json:
            doc.data = new
            return
        apply_changes(doc.node, doc.data, new)
        body = render_yaml(doc.node, self._doc_indent(doc.body))
        if to_plain(_yaml().load(body)) != new:
            where = Source(self.file, doc.line)
            raise YamlError(where, "internal: the edited document does not read back the same")
        doc.body, doc.data = _keep_tail(doc.body, body), new

    def append(self, objects: list[JSON]) -> None:
        """New documents at the end of the file (JSON: the object becomes a `List`)."""
        if not objects:
            return
        if self.is_json:
            self.docs[0].data = _as_list(self.docs[0].data, objects)
            return
        for obj in objects:
            self.extra.append("---\n" + render_yaml(_to_node(obj), self.file_indent))

    def _doc_indent(self, body: str) -> tuple[int, int]:
        """The document's own indentation, the file's where it shows none.

        `body` loaded cleanly in `_parse_doc`, so only ruamel's line heuristic runs here.
        """
        guessed = _guessed_indent(body, loads=False)
        needs_file = guessed is None or None in guessed
        return _filled(guessed, self.file_indent if needs_file else (2, 0))

    def text(self) -> str:
        if self.is_json:
            text = json.dumps(self.docs[0].data, indent=self.json_indent, ensure_ascii=False)
            return text + ("\n" if self.trailing_newline else "")
        out = "".join(d.head + d.body for d in self.docs)
        if self.extra and out and not out.endswith("\n"):
            out += "\n"
        return out + "".join(self.extra)


def parse_stream(text: str, file: str) -> Stream:
    """The documents of `text`; raises YamlError with `file:line` for broken input."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise YamlError(Source(file), f"larger than {MAX_TEXT_BYTES // (1024 * 1024)} MiB")
    if _looks_json(text, file):
        return _parse_json(text, file)
    docs = [_parse_doc(head, body, line, file) for head, body, line in split_documents(text)]
    return Stream(file, docs, indent_text=text)


def _looks_json(text: str, file: str) -> bool:
    return file.endswith(".json") or text.lstrip().startswith(("{", "["))


def _parse_json(text: str, file: str) -> Stream:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise YamlError(Source(file, err.lineno), f"not valid JSON: {err.msg}") from None
    indent = _json_indent(text)
    doc = Doc("", text, 1, None, data)
    return Stream(file, [doc], indent, True, text.endswith("\n"))


def _json_indent(text: str) -> int | None:
    lines = text.splitlines()
    if len(lines) < 2:
        return None
    second = lines[1]
    return len(second) - len(second.lstrip(" ")) or None


def split_documents(text: str) -> list[tuple[str, str, int]]:
    """(marker line, body, first body line) per document; they concatenate back to `text`."""
    starts = [m.start() for m in _MARKER.finditer(text)]
    bounds = [0, *[s for s in starts if s > 0], len(text)]
    parts: list[tuple[str, str, int]] = []
    for begin, end in itertools.pairwise(bounds):
        chunk = text[begin:end]
        head = ""
        if _MARKER.match(chunk) and _bare_marker(chunk):
            head = chunk[: chunk.find("\n") + 1] if "\n" in chunk else chunk
        line = text.count("\n", 0, begin) + 1 + head.count("\n")
        parts.append((head, chunk[len(head):], line))
    return parts


def _bare_marker(chunk: str) -> bool:
    first = chunk.split("\n", 1)[0][3:].strip()
    return not first or first.startswith("#")


def _parse_doc(head: str, body: str, line: int, file: str) -> Doc:
    try:
        node = _yaml().load(body)
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = line + (mark.line if mark is not None else 0)
        problem = err.problem or str(err).splitlines()[0]
        raise YamlError(Source(file, where), f"not valid YAML: {problem}") from None
    except (YAMLError, RecursionError, ValueError) as err:
        raise YamlError(Source(file, line), f"not valid YAML: {err}") from None
    return Doc(head, body, line, node, to_plain(node) if node is not None else None)


def _yaml() -> YAML:
    yaml = YAML(typ="rt", pure=True)
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def _guess_indent(text: str, default: tuple[int, int]) -> tuple[int, int]:
    """(mapping indent, sequence dash offset) as the document (or else the file) uses them."""
    return _filled(_guessed_indent(text, loads=True), default)


def _filled(
    guessed: tuple[int | None, int | None] | None, default: tuple[int, int]
) -> tuple[int, int]:
    if guessed is None:
        return default
    indent, offset = guessed
    return (default[0] if indent is None else int(indent),
            default[1] if offset is None else int(offset))


class _Loaded:
    """Stands in for ruamel's YAML in `load_yaml_guess_indent` when the text is known to load."""

    def load(self, _text: str) -> None:
        return None


def _guessed_indent(text: str, *, loads: bool) -> tuple[int | None, int | None] | None:
    """ruamel's guess, or None when the text does not load; `loads=False` skips the load."""
    try:
        _, indent, offset = load_yaml_guess_indent(text, **({} if loads else {"yaml": _Loaded()}))
    except (YAMLError, ValueError, RecursionError):
        return None
    return indent, offset


def render_yaml(node: Any, indent: tuple[int, int]) -> str:
    yaml = _yaml()
    mapping, offset = indent
    yaml.indent(mapping=mapping, sequence=max(mapping, offset + 2), offset=offset)
    buffer = io.StringIO()
    yaml.dump(node, buffer)
    return buffer.getvalue()


def _keep_tail(old: str, new: str) -> str:
    """Keep a body's missing final newline the way the file had it."""
    return new if old.endswith("\n") else new.rstrip("\n")


def _as_list(data: JSON, objects: list[JSON]) -> JSON:
    items = data.get("items") if isinstance(data, dict) else None
    if isinstance(data, dict) and data.get("kind") == "List" and isinstance(items, list):
        return {**data, "items": [*data["items"], *objects]}
    return {"apiVersion": "v1", "kind": "List", "items": [data, *objects]}


# ------------------------------------------------------------------ patching the ruamel tree


def apply_changes(root: Any, old: JSON, new: JSON) -> None:
    """Apply the minimal JSON patch from `old` to `new` onto the ruamel tree `root`."""
    pending: list[tuple[Any, str]] = []
    for op in jsonpatch.make_patch(old, new).patch:
        _apply_op(root, op, pending)
    for container, comment in pending:
        _attach_comment(container, comment)


def _apply_op(root: Any, op: dict[str, Any], pending: list[tuple[Any, str]]) -> None:
    kind = op["op"]
    if kind in ("move", "copy"):
        parent, key = _locate(root, op["from"])
        value = _to_node(to_plain(parent[key]))
        if kind == "move":
            _remove(parent, key, pending)
        parent, key = _locate(root, op["path"])
        _add(parent, key, value)
        return
    parent, key = _locate(root, op["path"])
    if kind == "remove":
        _remove(parent, key, pending)
    elif kind == "add":
        _add(parent, key, _to_node(op["value"]))
    elif kind == "replace":
        parent[key] = _to_node(op["value"])


def _locate(root: Any, pointer: str) -> tuple[Any, Any]:
    parts = jsonpatch.JsonPointer(pointer).parts
    node = root
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        return node, len(node) if last == "-" else int(last)
    return node, last


def _add(parent: Any, key: Any, value: Any) -> None:
    """Insert; a new `metadata` goes first, where people look for it.

    Appending at the end moves the full-line comments that followed the old last entry (ruamel
    hangs them on it) to after the new one, so they stay above whatever came next.
    """
    if key == "metadata" and isinstance(parent, CommentedMap) and key not in parent:
        parent.insert(0, key, value)
        return
    appending = key == len(parent) if isinstance(parent, list) else key not in parent
    moved = _trailing_comment(parent, None, None) if appending and _nonempty(parent) else ""
    if isinstance(parent, list):
        parent.insert(key, value)
    else:
        parent[key] = value
    if moved:
        _attach_comment(parent, moved)


def _remove(parent: Any, key: Any, pending: list[tuple[Any, str]]) -> None:
    """Remove `key`, keeping the full-line comments that ruamel had hung on it."""
    comment = _trailing_comment(parent[key], parent, key)
    keys = list(range(len(parent))) if isinstance(parent, list) else list(parent)
    position = keys.index(key)
    del parent[key]
    if not comment:
        return
    if position == len(keys) - 1:
        pending.append((parent, comment))  # after the other edits: new keys may follow
    elif position > 0:
        _attach_after(parent, keys[position - 1], comment)


def _attach_after(parent: Any, key: Any, comment: str) -> None:
    if _nonempty(parent[key]):
        _attach_comment(parent[key], comment)
    else:
        _hang(parent, key, comment)


def _trailing_comment(value: Any, parent: Any, key: Any) -> str:
    holder, last = _deepest_last(value) if _nonempty(value) else (parent, key)
    token = _token(holder, last)
    if token is None or "\n" not in token.value:
        return ""
    first, rest = token.value.split("\n", 1)
    token.value = first + "\n"
    return rest


def _nonempty(value: Any) -> bool:
    return isinstance(value, (CommentedMap, CommentedSeq)) and len(value) > 0


def _deepest_last(node: Any) -> tuple[Any, Any]:
    while True:
        last = len(node) - 1 if isinstance(node, list) else list(node)[-1]
        child = node[last]
        if not _nonempty(child):
            return node, last
        node = child


def _token(holder: Any, key: Any) -> CommentToken | None:
    entry = holder.ca.items.get(key) if hasattr(holder, "ca") else None
    if not entry:
        return None
    token = entry[0] if isinstance(holder, list) else entry[2]
    return token if isinstance(token, CommentToken) else None


def _attach_comment(container: Any, comment: str) -> None:
    """Hang full-line comments after the last scalar of `container` (dropped if it is empty)."""
    if not _nonempty(container) or not comment.strip():
        return
    holder, last = _deepest_last(container)
    _hang(holder, last, comment)


def _hang(holder: Any, last: Any, comment: str) -> None:
    token = _token(holder, last)
    if token is not None:
        token.value = token.value + comment
        return
    token = CommentToken("\n" + comment, CommentMark(0), None)
    slot = [token, None] if isinstance(holder, list) else [None, None, token, None]
    holder.ca.items[last] = slot


def _to_node(value: JSON) -> Any:
    if isinstance(value, dict):
        node = CommentedMap()
        for k, v in value.items():
            node[k] = _to_node(v)
        return node
    if isinstance(value, list):
        return CommentedSeq(_to_node(v) for v in value)
    return value
