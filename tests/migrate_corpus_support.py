"""Shared by the migrate corpus tests (tests/cli) and their kube-apiserver oracle (tests/e2e):
the corpus, and the objects in a migrated file that the API schema can judge."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from webhook.files.gotemplates import has_placeholders, mask
from webhook.rewrite import pod_specs

CORPUS = Path(__file__).parent / "migrate_corpus"
BUILTIN = {"v1", "apps/v1", "batch/v1", "resource.k8s.io/v1"}


def snapshot(root: Path) -> dict[str, bytes]:
    """Every corpus file's bytes by relative path (its README aside)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "README.md"
    }


def masked(text: str) -> str:
    """Helm placeholders as plain tokens, so that the text reads as the YAML it stands for."""
    return mask(text).text if has_placeholders(text) else text


def checkable(text: str, *, templated: bool = False) -> Iterator[dict[str, Any]]:
    """Built-in objects as they are; the pod specs of custom resources (and of Helm
    templates, whose other fields hold placeholders) as Pods."""
    for doc in yaml.safe_load_all(text):
        if not isinstance(doc, dict):
            continue
        if doc.get("apiVersion") in BUILTIN and (
            not templated or doc.get("kind") == "ResourceClaimTemplate"
        ):
            yield doc
            continue
        for spec in pod_specs(doc):
            yield {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
