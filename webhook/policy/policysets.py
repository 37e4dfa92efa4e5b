"""Policy sets in a repository: the policy files of one directory are judged together.

A GitOps repository keeps one policy directory per cluster (`clusters/east/policies`,
`clusters/west/policies`), each loaded by its own webhook; the same Tenant in two of them is
two clusters' Tenant, not a duplicate. So a policy set is the files directly in one directory
that hold policy documents; a subdirectory holding policy files is a set of its own. `lint`,
`check` and `test` find the same directory for a file: its own, or the nearest above it that
holds policy files itself.
"""

from __future__ import annotations

from pathlib import Path

from webhook.files.manifests import read_text
from webhook.files.yamlio import YamlError, parse_documents
from webhook.policy.kinds import KINDS
from webhook.types import API_VERSION

SUFFIXES = (".yaml", ".yml")


def holds_policy(file: Path) -> bool:
    """Whether a file holds a policy document (dragate's apiVersion and a policy kind)."""
    try:
        documents = parse_documents(read_text(str(file)), str(file))
    except YamlError:
        return False
    return any(
        isinstance(d.data, dict)
        and d.data.get("apiVersion") == API_VERSION
        and str(d.data.get("kind")) in KINDS
        for d in documents
    )


def files_in(directory: Path) -> list[Path]:
    """The *.yaml and *.yml files directly in `directory`, sorted; [] when it cannot be read."""
    try:
        return sorted(p for p in directory.iterdir() if p.suffix in SUFFIXES and p.is_file())
    except OSError:
        return []


def policy_files_in(directory: Path) -> list[Path]:
    """The policy set whose directory is `directory`: its files that hold policy documents."""
    return [p for p in files_in(directory) if holds_policy(p)]


def nearest_policy_dir(start: Path) -> Path | None:
    """`start` or the nearest directory above it that holds policy files itself; None if none."""
    start = start.resolve()
    return next((d for d in (start, *start.parents) if policy_files_in(d)), None)
