"""Real Kubernetes components judge what `dragate migrate` reads and writes.

- Duplicate keys: kubectl (`annotate --local`, no server) decides which value a repeated key
  has; migrate must read the same one.
- Output: every built-in object of the migrated corpus (ResourceClaimTemplates included)
  passes a strict server-side dry-run create on the real kube-apiserver 1.37. (Custom
  resources' pod specs are partial, their controllers fill them in; their schema is checked
  in tests/cli/test_migrate_corpus.py.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from migrate_corpus_support import CORPUS, checkable, masked, snapshot

from webhook.cli import main
from webhook.files.roundtrip import parse_stream

from .cluster import Cluster

pytestmark = pytest.mark.e2e

DUPLICATES = [
    (
        "top-level",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\n  name: second\ndata: {a: b}\n",
    ),
    (
        "three-times",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n  name: two\n  name: three\n",
    ),
    (
        "nested-block",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"
        "  labels:\n    app: first\n  labels:\n    tier: second\n",
    ),
    (
        "in-list-item",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n"
        "  - name: c\n    image: first\n    image: second\n",
    ),
]


def kubectl_reading(bin_dir: Path, text: str) -> Any:
    result = subprocess.run(
        [str(bin_dir / "kubectl"), "annotate", "--local", "-f", "-", "-o", "json", "x=y"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    obj = json.loads(result.stdout)
    del obj["metadata"]["annotations"]["x"]
    if not obj["metadata"]["annotations"]:
        del obj["metadata"]["annotations"]
    return obj


@pytest.mark.parametrize("text", [c[1] for c in DUPLICATES], ids=[c[0] for c in DUPLICATES])
def test_duplicate_keys_read_as_kubectl_reads_them(e2e_bin_dir: Path, text: str) -> None:
    doc = parse_stream(text, "dup.yaml").docs[0]
    assert doc.data == kubectl_reading(e2e_bin_dir, text)
    assert doc.warnings and all("duplicate key" in w for w in doc.warnings)


def test_migrated_corpus_passes_strict_server_dry_run(cluster: Cluster, tmp_path: Path) -> None:
    shutil.copytree(
        CORPUS, tmp_path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("unreadable")
    )
    before = snapshot(tmp_path)
    result = CliRunner().invoke(main, ["migrate", "--write", str(tmp_path)])
    assert result.exit_code == 1, result.output  # the legacy requests it cannot rewrite remain
    assert "legacy request(s) left" in result.stderr and "failed" not in result.stderr
    cluster.kubectl("create", "namespace", "corpus")
    checked = 0
    for name, data in snapshot(tmp_path).items():
        if data == before.get(name) or not name.endswith((".yaml", ".yml")):
            continue
        if name.startswith("helm-charts/") or name not in before:
            # chart files hold objects only once rendered, the ones migrate adds to a chart too:
            # tests/e2e/test_migrate_helm.py, tests/cli/test_migrate_helm_corpus.py render them
            continue
        text = data.decode()
        for obj in checkable(masked(text), templated=masked(text) != text):
            if obj["kind"] == "Pod" and obj["metadata"] == {"name": "p"}:
                continue  # a custom resource's partial pod spec: tests/cli checks its schema
            obj.setdefault("metadata", {})["namespace"] = "corpus"
            obj["metadata"].setdefault("name", "unnamed")
            cluster.kubectl(
                "create", "--dry-run=server", "--validate=strict", "-f", "-", input=json.dumps(obj)
            )
            checked += 1
    assert checked >= 30


def test_migrated_json_files_are_read_whole_by_kubectl(cluster: Cluster, tmp_path: Path) -> None:
    """A changed JSON file is a `List` kubectl reads whole (the wrapped object's lines left at
    their old indentation): every object in it, templates too, passes a strict server dry-run."""
    files = sorted((CORPUS / "reproductions").glob("*.json"))
    for file in files:
        shutil.copy(file, tmp_path / file.name)
    result = CliRunner().invoke(
        main, ["migrate", "--write", *(str(tmp_path / f.name) for f in files)]
    )
    assert result.exit_code == 0, result.output
    cluster.kubectl("create", "namespace", "ml")  # job-4space.json names it; others: default
    changed = 0
    for file in files:
        text = (tmp_path / file.name).read_text()
        if text == file.read_text():
            continue
        data = json.loads(text)
        assert data["kind"] == "List", file.name
        created = cluster.kubectl(
            "create",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            str(tmp_path / file.name),
            "-o",
            "name",
        )
        assert len(created.stdout.split()) == len(data["items"]), created.stdout
        changed += 1
    assert changed >= 4
