"""Finding and reading Kubernetes manifests: files, directories, `-`, YAML streams, JSON, Lists.

`check` and `lint` both read manifests the same way. A broken file does not stop the others:
its problem is returned beside the documents that could be read, and the command decides the
exit code.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from webhook.files.yamlio import Document, YamlError, parse_documents
from webhook.types import Source

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"


@dataclass(frozen=True)
class ManifestSet:
    """The objects read, in order, and the problems met on the way."""

    documents: tuple[Document, ...] = ()
    problems: tuple[YamlError, ...] = ()
    files: tuple[str, ...] = field(default=())


def find_files(paths: Iterable[str]) -> Iterator[str]:
    """Each path itself, or for a directory its manifest files, recursively and sorted."""
    for raw in paths:
        path = Path(raw)
        if raw != STDIN and path.is_dir():
            found = (p for p in path.rglob("*") if p.suffix in MANIFEST_SUFFIXES and p.is_file())
            yield from (str(p) for p in sorted(found))
        else:
            yield raw


def read_text(path: str, stdin: TextIO | None = None) -> str:
    """The text of a file, or of standard input for `-`; raises YamlError when unreadable."""
    try:
        if path == STDIN:
            return (stdin or sys.stdin).read()
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise YamlError(Source(path), f"cannot read: {reason}") from None


def read_manifests(paths: Sequence[str], stdin: TextIO | None = None) -> ManifestSet:
    """All Kubernetes objects in `paths`, `kind: List` expanded, with per-file problems."""
    documents: list[Document] = []
    problems: list[YamlError] = []
    files = list(find_files(paths))
    for file in files:
        try:
            text = read_text(file, stdin)
            documents.extend(objects_in(parse_documents(text, _display(file))))
        except YamlError as err:
            problems.append(err)
    return ManifestSet(tuple(documents), tuple(problems), tuple(files))


def _display(file: str) -> str:
    return "<stdin>" if file == STDIN else file


def objects_in(documents: Iterable[Document]) -> Iterator[Document]:
    """Documents that are objects; a List's items each become a document of their own."""
    for doc in documents:
        _require_object(doc)
        if _is_list(doc):
            yield from _list_items(doc)
        else:
            yield doc


def _is_list(doc: Document) -> bool:
    kind = doc.data.get("kind", "")
    return (
        isinstance(kind, str) and kind.endswith("List") and isinstance(doc.data.get("items"), list)
    )


def _list_items(doc: Document) -> Iterator[Document]:
    for i, item in enumerate(doc.data["items"]):
        node = doc.node["items"][i] if doc.node is not None else None
        item_doc = replace(doc, data=item, source=doc.source_of(["items", i]), node=node)
        _require_object(item_doc)
        yield item_doc


def _require_object(doc: Document) -> None:
    data = doc.data
    if not isinstance(data, dict):
        raise YamlError(doc.source, f"expected a Kubernetes object (a mapping), got {_type(data)}")
    for key in ("apiVersion", "kind"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise YamlError(
                doc.source, f"not a Kubernetes object: `{key}` is missing or not a string"
            )


def _type(value: object) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )
