"""Finding and reading Kubernetes manifests: files, directories, `-`, YAML streams, JSON, Lists.

`check` and `lint` both read manifests the same way. A broken file does not stop the others:
its problem is returned beside the documents that could be read, and the command decides the
exit code. A directory is a repository as people keep it: files found by walking one that hold
no Kubernetes object at all (a Helm `Chart.yaml` or `values.yaml`, `package.json`, a CI
workflow, a Go template that is YAML only once rendered) are skipped and counted, while a file
named on the command line is always read and refused when it is no manifest. A file is
written back whole, in one rename (`write_atomic`), so a reader never sees half of it.
"""

from __future__ import annotations

import fnmatch
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from webhook.files.gotemplates import has_placeholders
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
    skipped: tuple[str, ...] = ()  # walked files that hold no Kubernetes object


@dataclass(frozen=True)
class Found:
    """A file to read, and whether it was named on the command line or found by a walk."""

    path: str
    named: bool


def walk(paths: Iterable[str], exclude: Sequence[str] = ()) -> Iterator[Found]:
    """Each path itself, or for a directory its manifest files, recursively and sorted.

    `exclude` globs drop walked files (see `excluded`), and directories that are not the
    user's are not entered (see `not_the_users`); a path given by name is always kept.
    """
    for raw in paths:
        path = Path(raw)
        if raw == STDIN or not path.is_dir():
            yield Found(raw, named=True)
            continue
        for file in files_below(path, MANIFEST_SUFFIXES):
            if not excluded(PurePosixPath(file.relative_to(path).as_posix()), exclude):
                yield Found(str(file), named=False)


SKIPPED_DIRECTORIES = frozenset({"node_modules", "__pycache__"})


def not_the_users(directory: Path) -> bool:
    """A directory below a walked one that holds no manifest of the user's: a hidden one
    (`.git`, `.venv`, `.tox`, a ConfigMap mount's `..data`), a virtualenv (`pyvenv.cfg`,
    whatever its name), `node_modules`, `__pycache__`. Named on the command line, it is walked."""
    name = directory.name
    return (
        name.startswith(".") or name in SKIPPED_DIRECTORIES or (directory / "pyvenv.cfg").is_file()
    )


def files_below(directory: Path, suffixes: Sequence[str]) -> list[Path]:
    """Files with one of `suffixes` below `directory`, sorted, outside what `not_the_users`
    skips (never entered, so a virtualenv costs nothing)."""
    found: list[Path] = []
    for parent, directories, files in os.walk(directory):
        here = Path(parent)
        directories[:] = [d for d in directories if not not_the_users(here / d)]
        found.extend(here / f for f in files if Path(f).suffix in suffixes)
    return sorted(p for p in found if p.is_file())


def find_files(paths: Iterable[str], exclude: Sequence[str] = ()) -> Iterator[str]:
    """The paths `walk` finds."""
    return (found.path for found in walk(paths, exclude))


def excluded(relative: PurePosixPath, patterns: Sequence[str]) -> bool:
    """Whether a walked file matches an `--exclude` glob (`fnmatch`: `*` also matches `/`).

    A pattern without `/` is matched against each part of the path below the directory given
    (`node_modules`, `values*.yaml`); one with `/` against the whole relative path and each
    directory leading to it (`charts/*/templates`, `deploy/old` and what it holds); a leading
    or trailing `/` is ignored.
    """
    parents = [str(parent) for parent in reversed(relative.parents) if str(parent) != "."]
    for raw in patterns:
        pattern = raw.strip("/")
        candidates = relative.parts if "/" not in pattern else [*parents, str(relative)]
        if pattern and any(fnmatch.fnmatchcase(c, pattern) for c in candidates):
            return True
    return False


@dataclass(frozen=True)
class Parsed:
    """A file's text and its documents."""

    text: str
    documents: list[Document]


def parse_found(found: Found, stdin: TextIO | None = None) -> Parsed | None:
    """A file's text and documents; None for a walked file that holds no Kubernetes object.

    Such a file is a repository's other YAML and JSON: a Helm `Chart.yaml` or `values.yaml`, a
    `package.json`, a CI workflow, or a Go template that is YAML only once rendered. A file
    named on the command line is parsed as it is, so the caller refuses what is no manifest.
    Raises YamlError for an unreadable file and a syntax error outside a template.
    """
    text = read_text(found.path, stdin)
    try:
        documents = parse_documents(text, _display(found.path))
    except YamlError:
        if not found.named and has_placeholders(text):
            return None
        raise
    if not found.named and documents and not any(is_object(d.data) for d in documents):
        return None
    return Parsed(text, documents)


def is_object(data: Any) -> bool:
    """A mapping with a non-empty string `apiVersion` and `kind`."""
    if not isinstance(data, dict):
        return False
    return all(isinstance(data.get(key), str) and data[key] for key in ("apiVersion", "kind"))


def read_text(path: str, stdin: TextIO | None = None) -> str:
    """The text of a file, or of standard input for `-`; raises YamlError when unreadable."""
    try:
        if path == STDIN:
            return (stdin or sys.stdin).read()
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise YamlError(Source(path), f"cannot read: {reason}") from None


def write_atomic(path: str, text: str) -> None:
    """Replace `path` with `text` in one rename, keeping its mode: never a half-written file."""
    target = Path(path)
    mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_manifests(
    paths: Sequence[str],
    stdin: TextIO | None = None,
    *,
    exclude: Sequence[str] = (),
    skip_foreign: bool = False,
) -> ManifestSet:
    """All Kubernetes objects in `paths`, `kind: List` expanded, with per-file problems.

    With `skip_foreign`, walked files that hold no Kubernetes object are skipped and listed
    (`parse_found`); without it, every file must be a manifest (a state file, a policy input).
    """
    documents: list[Document] = []
    problems: list[YamlError] = []
    skipped: list[str] = []
    files = list(walk(paths, exclude))
    for found in files:
        try:
            parsed = parse_found(found if skip_foreign else replace(found, named=True), stdin)
            if parsed is None:
                skipped.append(found.path)
            else:
                documents.extend(objects_in(parsed.documents))
        except YamlError as err:
            problems.append(err)
    return ManifestSet(
        tuple(documents), tuple(problems), tuple(f.path for f in files), tuple(skipped)
    )


def _display(file: str) -> str:
    return "<stdin>" if file == STDIN else file


def objects_in(documents: Iterable[Document]) -> Iterator[Document]:
    """Documents that are objects; a List's items each become a document of their own."""
    for doc in documents:
        _require_object(doc)
        if _is_list(doc):
            yield from list_items(doc)
        else:
            yield doc


def _is_list(doc: Document) -> bool:
    kind = doc.data.get("kind", "")
    return (
        isinstance(kind, str) and kind.endswith("List") and isinstance(doc.data.get("items"), list)
    )


def list_items(doc: Document) -> Iterator[Document]:
    """Each item of a List document as a document of its own, with its own source line."""
    for i, item in enumerate(doc.data["items"]):
        node = doc.node["items"][i] if doc.node is not None else None
        item_doc = replace(doc, data=item, source=doc.source_of(["items", i]), node=node)
        _require_object(item_doc)
        yield item_doc


def _require_object(doc: Document) -> None:
    data = doc.data
    if not isinstance(data, dict):
        raise YamlError(doc.source, f"expected a Kubernetes object (a mapping), got {_type(data)}")
    if is_object(data):
        return
    for key in ("apiVersion", "kind"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise YamlError(
                doc.source, f"not a Kubernetes object: `{key}` is missing or not a string"
            )


def _type(value: object) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )
