"""Pods from every manifest the tests hold: the rewrite goldens and the migrate corpus.

For the admission fast path (`webhook.rewrite.podedits`), which must give exactly what the
general rewrite gives: every pod spec found in those files, as the Pod the API server would
send (the goldens' own Pods as they are), plus Pods that differ only in identity.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from migrate_corpus_support import CORPUS, masked

from webhook.files.gotemplates import TemplateFile
from webhook.rewrite import pod_specs

GOLDEN = Path(__file__).parent / "rewrite" / "golden"


def _documents() -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    paths = sorted(GOLDEN.glob("*.in.yaml")) + sorted(
        p
        for p in CORPUS.rglob("*")
        if p.suffix in (".yaml", ".yml", ".json") and "unreadable" not in p.parts
    )
    for path in paths:
        try:
            docs = list(yaml.safe_load_all(masked(path.read_text())))
        except (yaml.YAMLError, TemplateFile):
            continue  # Helm directives, duplicate keys: the migrate tests cover those files
        found += [(f"{path.name}#{i}", doc) for i, doc in enumerate(docs) if isinstance(doc, dict)]
    return found


def as_pod(name: str, spec: Any, namespace: str = "team-a") -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": {"app": "x"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(spec)}


def corpus_pods() -> list[tuple[str, dict[str, Any]]]:
    """(where from, Pod): the golden Pods as written, and each pod spec found anywhere."""
    pods = []
    for where, doc in _documents():
        if doc.get("kind") == "Pod":
            pods.append((where, copy.deepcopy(doc)))
        pods += [(f"{where}/{i}", as_pod(f"p{i}", s)) for i, s in enumerate(pod_specs(doc))]
    return pods


def corpus_objects() -> list[tuple[str, dict[str, Any]]]:
    """Every document as it is (workloads, lists, templates): the general path's share."""
    return [(where, copy.deepcopy(doc)) for where, doc in _documents()]
