"""Loading policy files (Tenant, DeviceClassPolicy, LegacyResourceMapping, Settings).

Policies are kept in git and reloaded while the webhook runs, so a bad edit must never half-apply:
every file is read, every problem in every file is collected with `file:line`, and either one
complete, compiled PolicySet comes back or one PolicyError listing everything to fix.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from webhook.files.manifests import files_below, list_items, read_text
from webhook.files.yamlio import Document, YamlError, parse_documents
from webhook.policy.kinds import HEADER, KINDS
from webhook.policy.schema import INVALID, PolicyError, PolicyProblem, Report
from webhook.policy.suites import SUITE_KIND, is_suite
from webhook.types import (
    DeviceClassPolicy,
    LegacyResourceMapping,
    PolicySet,
    Settings,
    Source,
    Tenant,
)

__all__ = [
    "POLICY_SUFFIXES",
    "PolicyError",
    "PolicyProblem",
    "default_mappings",
    "default_policy_dir",
    "load_policies",
    "parse_policies",
    "policy_files",
]

POLICY_SUFFIXES = (".yaml", ".yml")
DEFAULT_MAPPING = "defaults/policies/legacy-mapping.yaml"
"""The shipped mapping: a copy of policies/legacy-mapping.yaml, kept equal by a test."""
BUILTIN = "<built-in>"


@dataclass(frozen=True)
class Loaded:
    """A policy read from one document, kept with the document for cross-document messages."""

    kind: str
    name: str
    policy: Any
    doc: Document


# --------------------------------------------------------------------------- public API


def load_policies(paths: Sequence[str | Path]) -> PolicySet:
    """Every policy in `paths` (files, or directories searched recursively for *.yaml/*.yml)."""
    problems: list[PolicyProblem] = []
    texts, files = read_texts(paths, problems)
    return _assemble(texts, problems, files)


def read_texts(
    paths: Sequence[str | Path], problems: list[PolicyProblem]
) -> tuple[list[tuple[str, str]], list[str]]:
    """The text of every policy file under `paths`, and the files in order; what cannot be
    read becomes a problem."""
    texts: list[tuple[str, str]] = []
    files = policy_files(paths, problems)
    for file in files:
        try:
            texts.append((file, read_text(file)))
        except YamlError as err:
            problems.append(PolicyProblem(err.source, "", err.message))
    return texts, files


def parse_policies(text: str, file: str = "<memory>") -> PolicySet:
    """The policies in one YAML text, as if read from `file`."""
    return _assemble([(file, text)], [])


def policy_files(paths: Sequence[str | Path], problems: list[PolicyProblem]) -> list[str]:
    """The files to read, in a stable order; missing paths and empty folders become problems."""
    files: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = files_under(path)
            files.extend(str(p) for p in found)
            if not found:
                problems.append(PolicyProblem(Source(str(path)), "", "no *.yaml or *.yml files"))
        else:
            files.append(str(raw))
    return files


def files_under(directory: Path) -> list[Path]:
    """Policy files below `directory`, sorted, walked as manifests are (`files_below`).

    A ConfigMap mount holds every file twice (`..data/x.yaml` and the `x.yaml` link to it),
    and a git checkout has `.git`; only the visible names are the policy set.
    """
    return files_below(directory, POLICY_SUFFIXES)


def default_policy_dir() -> Path:
    """The example policy set shipped inside the package: what `serve`/`check` use by default."""
    return Path(str(resources.files("webhook").joinpath("defaults", "policies")))


@functools.cache
def default_mappings() -> tuple[LegacyResourceMapping, ...]:
    """The built-in NVIDIA mapping, used when the loaded policies define none (compiled once)."""
    text = resources.files("webhook").joinpath(DEFAULT_MAPPING).read_text(encoding="utf-8")
    return _assemble([(f"{BUILTIN}/{Path(DEFAULT_MAPPING).name}", text)], []).mappings


# --------------------------------------------------------------------------- reading


def _assemble(
    texts: list[tuple[str, str]], problems: list[PolicyProblem], order: Sequence[str] = ()
) -> PolicySet:
    """One PolicySet from all texts, or one PolicyError naming every problem in file order."""
    loaded = read_all(texts, problems)
    if problems:
        rank = {file: i for i, file in enumerate(order or [file for file, _ in texts])}
        problems.sort(key=lambda p: (rank.get(p.source.file, len(rank)), p.source.line))
        raise PolicyError(problems)
    return policy_set_of(loaded, digest_of(text for _, text in texts))


def read_all(texts: list[tuple[str, str]], problems: list[PolicyProblem]) -> list[Loaded]:
    loaded: list[Loaded] = []
    for file, text in texts:
        try:
            documents = [d for listed in parse_documents(text, file) for d in as_written(listed)]
        except YamlError as err:
            problems.append(PolicyProblem(err.source, "", err.message))
            continue
        for doc in documents:
            report = Report(doc)
            item = read_document(doc, report)
            problems.extend(report.problems)
            if item is not None:
                loaded.append(item)
    problems.extend(cross_document_problems(loaded))
    if not problems:  # a later PolicyError would throw the built objects away anyway
        return loaded
    return []


SERVER_METADATA = frozenset(
    {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"}
)
"""Metadata the API server writes; `kubectl get -o yaml` prints it, a policy never sets it."""


def as_written(doc: Document) -> list[Document]:
    """A document as its author wrote it: what `kubectl get tenants,... -o yaml` prints (a
    `kind: List` whose items carry `status` and server metadata) becomes its items, each
    without what the server added, each with its own line. Other documents pass as they are,
    so a typo in a hand-written `metadata` is still a problem."""
    data = doc.data
    if not isinstance(data, dict):
        return [doc]
    if data.get("kind") == "List" and isinstance(data.get("items"), list):
        return [_served(d) for d in list_items(doc)]
    return [_served(doc)]


def _served(doc: Document) -> Document:
    data, metadata = doc.data, doc.data.get("metadata") if isinstance(doc.data, dict) else None
    if not isinstance(metadata, dict) or not SERVER_METADATA & set(metadata):
        return doc
    kept = {k: v for k, v in metadata.items() if k not in SERVER_METADATA}
    body = {k: v for k, v in data.items() if k != "status"}
    return replace(doc, data={**body, "metadata": kept})


NOT_POLICIES = frozenset({SUITE_KIND})
"""Kinds of the dragate.io group that may share a policy directory without being policies."""


def read_document(doc: Document, report: Report) -> Loaded | None:
    """The policy in one document; None (with problems reported) when it cannot be built."""
    if not isinstance(doc.data, dict):
        report.wrong(
            (), "a policy document (a mapping with apiVersion, kind, metadata, spec)", doc.data
        )
        return None
    if str(doc.data.get("kind")) in NOT_POLICIES or is_suite(doc.data, near=True):
        return None  # test suites live beside the policies they test; `test` reads them
    HEADER.read(doc.data, (), report)
    kind = KINDS.get(str(doc.data.get("kind")))
    if kind is None:
        return None
    body = kind.document.read(doc.data, (), report)
    if body is INVALID:
        return None
    name: str = body["metadata"]["name"]
    return Loaded(kind.name, name, kind.build(name, body.get("spec", {}), doc.source), doc)


def policy_set_of(loaded: list[Loaded], digest: str) -> PolicySet:
    def of(kind: str) -> tuple[Any, ...]:
        return tuple(item.policy for item in loaded if item.kind == kind)

    mappings: tuple[LegacyResourceMapping, ...] = of("LegacyResourceMapping")
    settings: tuple[Settings, ...] = of("Settings")
    tenants: tuple[Tenant, ...] = of("Tenant")
    class_policies: tuple[DeviceClassPolicy, ...] = of("DeviceClassPolicy")
    return PolicySet(
        tenants=tenants,
        class_policies=class_policies,
        mappings=mappings or default_mappings(),
        settings=settings[0] if settings else Settings(),
        digest=digest,
    )


def digest_of(texts: Iterator[str] | Sequence[str]) -> str:
    """Short sha256 over the sorted file contents: renaming or reordering files keeps it."""
    hashes = sorted(hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts)
    return hashlib.sha256("\n".join(hashes).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- across documents


def cross_document_problems(loaded: list[Loaded]) -> list[PolicyProblem]:
    """Rules no single document can break alone: names, one Settings, one owner per namespace."""
    reports = [Report(item.doc) for item in loaded]
    _check_names(loaded, reports)
    _check_one_settings(loaded, reports)
    _check_namespace_owners(loaded, reports)
    return [p for r in reports for p in r.problems]


def _check_names(loaded: list[Loaded], reports: list[Report]) -> None:
    first: dict[tuple[str, str], Loaded] = {}
    for item, report in zip(loaded, reports, strict=True):
        earlier = first.setdefault((item.kind, item.name), item)
        if earlier is not item and item.kind != "Settings":
            report.add(
                ("metadata", "name"),
                f'{item.kind} "{item.name}" is already defined at '
                f"{earlier.doc.source_of(('metadata', 'name'))}",
            )


def _check_one_settings(loaded: list[Loaded], reports: list[Report]) -> None:
    pairs = zip(loaded, reports, strict=True)
    settings = [(item, report) for item, report in pairs if item.kind == "Settings"]
    for _, report in settings[1:]:
        first = settings[0][0]
        report.add(
            ("kind",),
            f"only one Settings document is allowed; the first is "
            f'"{first.name}" at {first.doc.source}',
        )


def _check_namespace_owners(loaded: list[Loaded], reports: list[Report]) -> None:
    owners: dict[str, tuple[Loaded, int]] = {}
    for item, report in zip(loaded, reports, strict=True):
        if item.kind != "Tenant":
            continue
        for i, namespace in _listed_namespaces(item.doc):
            owner, at = owners.setdefault(namespace, (item, i))
            if owner.name != item.name:
                where = owner.doc.source_of(("spec", "namespaces", at))
                report.add(
                    ("spec", "namespaces", i),
                    f'namespace "{namespace}" is already in tenant "{owner.name}" ({where})',
                )


def _listed_namespaces(doc: Document) -> Iterator[tuple[int, str]]:
    """The namespaces a Tenant document lists, with their positions (for line numbers)."""
    listed = doc.data["spec"].get("namespaces")  # a Tenant was built, so spec is a mapping
    listed = listed if isinstance(listed, list) else []
    return ((i, ns) for i, ns in enumerate(listed) if isinstance(ns, str))
