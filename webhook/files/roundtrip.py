"""Editing manifests in place: comments, key order, quoting and layout kept.

`dragate migrate` changes a few keys in a few documents of files people maintain by hand, so
the diff it leaves must be just those keys. The text is cut into documents at their `---`
markers; a document that does not change is never re-rendered (byte-identical), and one that
does is patched (JSON-patch ops computed on plain data, applied to the ruamel tree) and dumped
alone with the file's own indentation. JSON files stay JSON, with their indent.

Reading with ruamel's round-trip loader is most of the cost, so it never happens for a document
the caller's `skip` rules out (`webhook.files.skim`), nor for a plain one libyaml reads
(`webhook.files.plainyaml`: the same data, and the positions a text patch needs) unless it
must be rendered whole.

Relies on (checked with ruamel.yaml 0.19.1; canaries: tests/canary/test_ruamel.py):
- `ruamel.yaml.constructor.DuplicateKeyError`: the round-trip loader's refusal of a repeat.
- `ruamel.yaml.error.MarkedYAMLError marks`: problem_mark/context_mark lines, problem.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from webhook.files.duplicates import find_duplicates, without_earlier
from webhook.files.jsontext import patch_json, wrap_in_list
from webhook.files.plainyaml import Located, read_document
from webhook.files.rtyaml import (
    filled_indent,
    guessed_indent,
    load_rt,
    reads_back,
    render_new,
    render_yaml,
    sketch,
)
from webhook.files.textpatch import Style, document_style, measured, patch_text, render_document
from webhook.files.treepatch import apply_changes
from webhook.files.yamlio import MAX_TEXT_BYTES, YamlError, to_plain
from webhook.types import JSON, Source

_MARKER = re.compile(r"^---(?=[ \t]|$)", re.MULTILINE)
_CONTENT_LINE = re.compile(r"^[A-Za-z0-9\"'{\[]", re.MULTILINE)


@dataclass
class Doc:
    """One document: its `---` line(s) kept verbatim, its body, and both views of its data.

    `parsed` is False for a document the caller ruled out of any change: it was never loaded
    (no node, no data) and is copied back byte for byte.
    """

    head: str
    body: str
    line: int
    node: Any = None
    data: JSON = None
    parsed: bool = True
    loaded: str | None = None
    """The text `node` was loaded from when it is not `body`: the lines of the earlier of
    repeated keys blanked (so line numbers still match `body`)."""
    warnings: list[str] = field(default_factory=list)
    located: Located | None = None
    """Where libyaml found the entries of a document it read (no `node` then): enough for a
    text patch; ruamel's tree is loaded only if the document must be rendered whole."""


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
    """When set, `indent` is guessed from this text the first time it is needed (skipped for
    files whose documents do not change)."""
    changed: bool = False
    new_style: Style | None = None
    """How new documents are indented: like the first edited document, block by block."""
    json_whole: bool = False
    """A JSON edit could not be spliced into the text: the file is dumped whole."""
    indent_loads: bool | None = None
    """Whether the whole `indent_text` loads as one document, when its split alone tells; None:
    ruamel must load it to know (see `whole_text_loads`)."""

    @property
    def file_indent(self) -> tuple[int, int]:
        if self.indent_text is not None:
            text, self.indent_text = self.indent_text, None
            self.indent = filled_indent(_file_guess(text, self.indent_loads), (2, 0))
        return self.indent

    def update(self, index: int, new: JSON) -> None:
        """Make document `index` hold `new`, touching only the keys that differ."""
        doc = self.docs[index]
        self.changed = True
        if self.is_json:
            self._update_json(doc, new)
            return
        base = doc.loaded if doc.loaded is not None else doc.body  # same lines as body
        if doc.node is None and doc.located is None:
            doc.node = self._tree(doc, base)
        positions = doc.node if doc.node is not None else sketch(doc.data, doc.located)
        self.new_style = self.new_style or _safe_style(positions, base)
        patched = patch_text(doc.body, positions, doc.data, new)
        if patched is not None and reads_back(patched, new):
            loaded = (
                None if doc.loaded is None else without_earlier(patched, find_duplicates(patched))
            )
            doc.body, doc.data, doc.node, doc.loaded = patched, new, None, loaded
            doc.located = None
            return
        if doc.node is None:  # the whole document is rendered: comments must be in the tree
            doc.node = self._tree(doc, base)
        indent = self._doc_indent(doc.node, doc.body)
        apply_changes(doc.node, doc.data, new)
        body = render_yaml(doc.node, indent)
        if not reads_back(body, new):
            where = Source(self.file, doc.line)
            raise YamlError(where, "internal: the edited document does not read back the same")
        doc.body, doc.data = _keep_tail(doc.body, body), new

    def _tree(self, doc: Doc, base: str) -> Any:
        """ruamel's tree of a document read as plain data (or edited before), which must read
        as that data: a document is never written from a reading ruamel does not share."""
        node = load_rt(base)
        if to_plain(node) != doc.data:
            where = Source(self.file, doc.line)
            raise YamlError(where, "internal: libyaml and ruamel read this document differently")
        return node

    def append(self, objects: list[JSON], after: int | None = None) -> None:
        """New documents at the end of the file (JSON: the object becomes a `List`); with
        `after`, right after that document's last entry, ahead of the comment lines ending it
        (where a template's block ends stand as comments, see `webhook.files.gotemplates`)."""
        if not objects:
            return
        self.changed = True
        if self.is_json:
            self._append_json(self.docs[0], objects)
            return
        texts = ["---\n" + self._new_text(obj) for obj in objects]
        if after is None:
            self.extra.extend(texts)
            return
        doc = self.docs[after]
        lines = doc.body.splitlines(keepends=True)
        end = len(lines)
        while end and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
            end -= 1
        head = "".join(lines[:end])
        head += "" if not head or head.endswith("\n") else "\n"
        doc.body = head + "".join(texts) + "".join(lines[end:])

    def _new_text(self, obj: JSON) -> str:
        if self.new_style is not None:
            return render_document(obj, self.new_style)
        return render_new(obj, self.file_indent)

    def _update_json(self, doc: Doc, new: JSON) -> None:
        patched = None if self.json_whole else patch_json(doc.body, doc.data, new)
        self.json_whole = patched is None
        doc.body, doc.data = patched or (doc.body, new)

    def _append_json(self, doc: Doc, objects: list[JSON]) -> None:
        """Templates into the file's `List`, or the single object wrapped in one (see
        `wrap_in_list`); the whole file is dumped again only when neither can be spliced."""
        new = _as_list(doc.data, objects)
        if not self.json_whole and new.get("items", [None])[0] is doc.data:  # wrapped
            doc.body, doc.data = wrap_in_list(doc.body, objects, self.json_indent), new
            return
        self._update_json(doc, new)

    def _doc_indent(self, node: Any, body: str) -> tuple[int, int]:
        """The document's own indentation (its mapping step and its dashes' offset, measured
        on its tree), the file's where it shows none.

        ruamel's guess is not used for the document: it gives a sequence's content column as
        the mapping step (4 for `  - name:` under 2-space mappings).
        """
        try:
            mapping, seq = measured(node, body)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            mapping, seq = None, None
        found = (mapping, seq[0] if seq is not None else None)
        return filled_indent(found, self.file_indent if None in found else (2, 0))

    def text(self) -> str:
        if self.is_json and not self.json_whole:
            return self.docs[0].body
        if self.is_json:
            text = json.dumps(self.docs[0].data, indent=self.json_indent, ensure_ascii=False)
            return text + ("\n" if self.trailing_newline else "")
        out = "".join(d.head + d.body for d in self.docs)
        if self.extra and out and not out.endswith("\n"):
            out += "\n"
        return out + "".join(self.extra)


Skip = Callable[[str], bool]
"""True for a document body that certainly needs no change: it is then never loaded."""

Exclusive = Callable[[int, int], bool]
"""True for two 1-based file lines no rendering of the template holds both of
(`webhook.files.branches`): a key repeated across them is no duplicate."""


def parse_stream(
    text: str, file: str, skip: Skip | None = None, exclusive: Exclusive | None = None
) -> Stream:
    """The documents of `text`; raises YamlError with `file:line` for broken input."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise YamlError(Source(file), f"larger than {MAX_TEXT_BYTES // (1024 * 1024)} MiB")
    if _looks_json(text, file):
        return _parse_json(text, file)
    docs = [
        _read_doc(head, body, line, file, skip, exclusive=exclusive)
        for head, body, line in split_documents(text)
    ]
    return Stream(file, docs, indent_text=text, indent_loads=whole_text_loads(docs))


def _read_doc(
    head: str, body: str, line: int, file: str, skip: Skip | None, *, exclusive: Exclusive | None
) -> Doc:
    """Skipped, read by libyaml when plain (ruamel's tree is loaded only if it changes), or
    loaded by ruamel."""
    if skip is not None and skip(body):
        return Doc(head, body, line, parsed=False)
    plain = read_document(body)
    if plain is not None:
        return Doc(head, body, line, None, plain.data, located=plain.located)
    return _parse_doc(head, body, line, file, exclusive)


def whole_text_loads(docs: list[Doc]) -> bool | None:
    """Whether ruamel's single-document `load` of the whole file succeeds, if the split tells.

    ruamel's indent guess for the file loads it whole, and gives up when that fails. Every part
    after the first starts with a `---` at column 0, which always starts a document; the first
    part is one when it has a marker or a line starting at column 0 with a letter, digit, quote
    or bracket (comments start with `#`, directives with `%`). Two documents fail the load. A
    file that is a single parsed document without a marker is exactly the text that loaded,
    unless repeated keys were cut from it first (see `webhook.files.duplicates`).
    """
    if any(doc.loaded is not None for doc in docs):
        return False  # a repeated key: ruamel's whole-file load refuses it
    if len(docs) == 1 and not docs[0].head and docs[0].parsed:
        return True
    first = docs[0]
    if len(docs) > 2 or (len(docs) == 2 and (first.head or _CONTENT_LINE.search(first.body))):
        return False
    return None


def _file_guess(text: str, loads: bool | None) -> tuple[int | None, int | None] | None:
    """ruamel's guess for the whole file, loading it only when `loads` cannot tell."""
    guessed = guessed_indent(text, loads=loads is None)  # the line heuristic always runs
    return None if loads is False else guessed


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
        parts.append((head, chunk[len(head) :], line))
    return parts


def _bare_marker(chunk: str) -> bool:
    first = chunk.split("\n", 1)[0][3:].strip()
    return not first or first.startswith("#")


def _parse_doc(
    head: str, body: str, line: int, file: str, exclusive: Exclusive | None = None
) -> Doc:
    try:
        return _loaded_doc(head, body, line, body)
    except DuplicateKeyError:
        return _deduplicated(head, body, line, file, exclusive)
    except MarkedYAMLError as err:
        raise _yaml_error(err, line, file) from None
    except (YAMLError, RecursionError, ValueError, TypeError) as err:  # TypeError: a mapping
        raise YamlError(Source(file, line), f"not valid YAML: {err}") from None  # as a key


def _loaded_doc(head: str, body: str, line: int, text: str) -> Doc:
    node = load_rt(text)
    loaded = None if text is body else text
    return Doc(head, body, line, node, to_plain(node) if node is not None else None, True, loaded)


def _yaml_error(err: MarkedYAMLError, line: int, file: str) -> YamlError:
    mark = err.problem_mark or err.context_mark
    where = line + (mark.line if mark is not None else 0)
    problem = err.problem or str(err).splitlines()[0]
    return YamlError(Source(file, where), f"not valid YAML: {problem}")


def _deduplicated(head: str, body: str, line: int, file: str, exclusive: Exclusive | None) -> Doc:
    """A document with repeated keys, read as kubectl reads it: the last of each wins. A key
    repeated in an exclusive branch of a template is loaded the same way, without a warning."""
    try:
        duplicates = find_duplicates(body)
        doc = _loaded_doc(head, body, line, without_earlier(body, duplicates))
    except MarkedYAMLError as err:
        raise _yaml_error(err, line, file) from None
    except (YAMLError, RecursionError, ValueError, TypeError) as err:  # TypeError: a mapping
        raise YamlError(Source(file, line), f"not valid YAML: {err}") from None  # as a key
    doc.warnings.extend(
        f'{file}:{line + d.line}: duplicate key "{d.key}" (also at line {line + d.earlier}): '
        "kubectl keeps the last one, and so does dragate"
        for d in duplicates
        if exclusive is None or not exclusive(line + d.line, line + d.earlier)
    )
    return doc


def _safe_style(node: Any, body: str) -> Style | None:
    try:
        return document_style(node, body)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return None


def _keep_tail(old: str, new: str) -> str:
    """Keep a body's missing final newline the way the file had it."""
    return new if old.endswith("\n") else new.rstrip("\n")


def new_file_text(file: str, objects: list[JSON]) -> str:
    """A file of `objects` alone (`--templates-out`): YAML documents, or a JSON `List`."""
    if not file.endswith(".json"):
        stream = parse_stream("", file)
        stream.append(objects)
        return stream.text()
    items = {"apiVersion": "v1", "kind": "List", "items": objects}
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"


def _as_list(data: JSON, objects: list[JSON]) -> dict[str, Any]:
    items = data.get("items") if isinstance(data, dict) else None
    if isinstance(data, dict) and data.get("kind") == "List" and isinstance(items, list):
        return {**data, "items": [*data["items"], *objects]}
    return {"apiVersion": "v1", "kind": "List", "items": [data, *objects]}
