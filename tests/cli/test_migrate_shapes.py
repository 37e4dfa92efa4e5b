"""`dragate migrate` on the shapes real repositories hold: Helm templates, duplicate keys,
JSON without GPUs, objects that would crash a careless rewriter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import webhook.cli.migrate as migrate_cli
from webhook.cli import main

POD = """apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: c
    image: c
    resources:
      limits:
        nvidia.com/gpu: 1
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["migrate", *args])
    return result.exit_code, result.stdout, result.stderr


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


TEMPLATES = [
    (
        "placeholder-key",
        "kind: Pod\nmetadata:\n  {{ .Values.key }}: x\n",
        "{{ .Values.key }} stands in a key",
    ),
    (
        "not-yaml-until-rendered",
        "kind: Pod\n{{- range .Values.x }}\n- a\n{{- end }}\n",
        "line 3 not YAML until rendered",
    ),
]


@pytest.mark.parametrize(
    ("text", "reason"), [c[1:] for c in TEMPLATES], ids=[c[0] for c in TEMPLATES]
)
def test_template_files_are_skipped_with_a_reason(tmp_path: Path, text: str, reason: str) -> None:
    """Without a legacy request in it, a template dragate cannot read changes no exit code."""
    path = write(tmp_path, "t.yaml", text)
    for flag in ([], ["--check"], ["--write"]):
        status, _out, err = run(*flag, str(path))
        assert status == 0, err
        assert f"{path}: template file, skipped: " in err and reason in err
        assert "not valid YAML" not in err.split("(")[0]
        assert "1 template file(s) skipped" in err
    assert path.read_text() == text


ACTION_LINES = [
    ("directive-line", "kind: Pod\n{{- if .Values.gpu }}\nspec: {}\n{{- end }}\n"),
    ("nindent-block", "kind: Pod\nspec:\n  resources:\n    {{- toYaml .Values.r | nindent 4 }}\n"),
    ("multi-line-comment", "{{- /*\nlicence\n*/ -}}\nkind: Pod\nspec: {}\n"),
    (
        "assignment-and-else",
        "{{- $x := 1 }}\nkind: Pod\n{{- if .A }}\na: 1\n{{- else }}\nb: 2\n{{- end }}\n",
    ),
]


@pytest.mark.parametrize("text", [c[1] for c in ACTION_LINES], ids=[c[0] for c in ACTION_LINES])
def test_action_lines_are_read_around(tmp_path: Path, text: str) -> None:
    """Lines of template actions alone are comments to the reader: a file with nothing to
    migrate is neither skipped nor changed."""
    path = write(tmp_path, "t.yaml", text)
    status, _out, err = run("--check", str(path))
    assert status == 0, err
    assert "skipped" not in err
    run("--write", str(path))
    assert path.read_text() == text


def test_scalar_placeholders_are_migrated_and_kept(tmp_path: Path) -> None:
    text = POD.replace("name: p", "name: {{ .Release.Name }}").replace(
        "image: c", 'image: "{{ .Values.image }}"'
    )
    path = write(tmp_path, "t.yaml", text)
    status, _, err = run("--write", str(path))
    out = path.read_text()
    assert status == 0, err
    assert "name: {{ .Release.Name }}" in out and 'image: "{{ .Values.image }}"' in out
    assert "resourceClaimTemplateName:" in out and "nvidia.com/gpu: 1" not in out
    assert run("--check", str(path))[0] == 0


def test_duplicate_keys_warn_with_lines_and_last_wins(tmp_path: Path) -> None:
    text = POD.replace("  name: p\n", "  name: first\n  name: p\n")
    path = write(tmp_path, "dup.yaml", text)
    status, _, err = run("--write", str(path))
    assert status == 0, err
    assert f'{path}:5: duplicate key "name" (also at line 4): kubectl keeps the last one' in err
    pod = next(yaml.safe_load_all(path.read_text()))
    assert pod["metadata"]["name"] == "p"
    assert path.read_text().startswith(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: first\n  name: p\n"
    )  # both kept: the diff is GPU lines only


HPA = """{{- if semverCompare ">=1.23-0" .Capabilities.KubeVersion.GitVersion }}
apiVersion: autoscaling/v2
{{- else }}
apiVersion: autoscaling/v2beta2
{{- end }}
kind: HorizontalPodAutoscaler
metadata:
  name: {{ .Release.Name }}
spec:
  minReplicas: 1
"""


@pytest.mark.parametrize(
    ("text", "warned"),
    [
        (HPA, False),
        (HPA.replace("{{- else }}\n", ""), True),
        (HPA.replace("  minReplicas: 1\n", "  minReplicas: 1\n  minReplicas: 2\n"), True),
    ],
    ids=["if-and-else", "same-branch", "outside-the-branches"],
)
def test_a_key_in_exclusive_template_branches_is_no_duplicate(
    tmp_path: Path, text: str, warned: bool
) -> None:
    path = write(tmp_path, "hpa.yaml", text)
    status, _, err = run("--check", str(path))
    assert status == 0, err
    assert ("duplicate key" in err) is warned, err


def test_duplicate_keys_in_a_document_without_change_stay(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n---\n" + POD
    path = write(tmp_path, "dup.yaml", text)
    run("--write", str(path))
    assert path.read_text().startswith(text.split("---")[0])


@pytest.mark.parametrize(
    "text",
    [
        '{"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "[1,2]"}, "x": [1,2,3]}',
        "[1, 2,\n 3]\n",
        '{"dashboard": {"panels": [{"id": 1}]}}\n',
    ],
    ids=["compact-object", "array", "dashboard"],
)
def test_json_without_gpu_is_byte_identical(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "x.json", text)
    assert run("--check", str(path))[0] == 0
    run("--write", str(path))
    assert path.read_text() == text


@pytest.mark.parametrize(
    "text",
    [
        POD.replace("metadata:\n  name: p\n", "metadata:\n"),
        POD + "  resourceClaims:\n",
        POD.replace("  containers:", "  initContainers:\n  containers:"),
        "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    metadata:\n    spec:\n"
        "      containers:\n      - name: c\n        resources:\n"
        "          limits: {nvidia.com/gpu: 1}\n",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\nspec:\n  containers:\n  - name: c\n"
        "    resources: {limits: {nvidia.com/gpu: 1}, claims:}\n",
    ],
    ids=[
        "null-metadata",
        "null-resource-claims",
        "null-init-containers",
        "null-template-meta",
        "null-annotations-and-claims",
    ],
)
def test_null_shapes_are_migrated(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "p.yaml", text)
    status, _, err = run("--write", str(path))
    assert status == 0, err
    assert "nvidia.com/gpu: 1" not in path.read_text()
    assert run("--check", str(path))[0] == 0


def test_an_internal_error_stops_only_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = write(tmp_path, "a.yaml", POD.replace("name: p", "name: boom"))
    good = write(tmp_path, "b.yaml", POD)
    real = migrate_cli.rewrite_object

    def flaky(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if obj.get("metadata", {}).get("name") == "boom":
            raise KeyError("boom")
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(migrate_cli, "rewrite_object", flaky)
    status, out, err = run(str(bad), str(good))
    assert status == 2
    assert f"{bad}: not migrated: internal error (KeyError" in err
    assert f"would migrate {good}" in out
