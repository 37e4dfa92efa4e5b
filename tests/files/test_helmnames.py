"""The ResourceClaimTemplates `dragate migrate` adds to a Helm template are named per release,
and the Pods reference those names; elsewhere they keep the rewriter's names.

Driven through `dragate migrate`, the one caller: each case is a file (where it lies, its
text), and the template name the migrated text must name and reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from webhook.cli import main

POD = """apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  containers:
    - name: c
      image: IMAGE
      resources:
        limits:
          nvidia.com/gpu: 2
"""
PER_RELEASE = "{{ $.Release.Name }}-dragate-gpu-nvidia-com-2"
FIXED = "dragate-gpu-nvidia-com-2"


def pod(name: str = "p", image: str = "i") -> str:
    return POD.replace("NAME", name).replace("IMAGE", image)


CASES = [
    (
        "a-template-using-helms-objects",
        "t.yaml",
        "{{- if .Values.on }}\n" + pod() + "{{- end }}\n",
        [],
        (PER_RELEASE, 1),
    ),
    (
        "a-chart-template-known-by-its-folder",
        "chart/templates/pod.yaml",
        pod(image='{{ template "image" }}'),
        [],
        (PER_RELEASE, 1),
    ),
    (
        "inside-a-with-block-the-root-release-name",
        "t.yaml",
        "{{- with .Values.worker }}\n" + pod(image="{{ .image }}") + "{{- end }}\n",
        [],
        (PER_RELEASE, 1),
    ),
    (
        "two-workloads-share-one-template",
        "t.yaml",
        pod("{{ .Release.Name }}-a") + "---\n" + pod("{{ .Release.Name }}-b"),
        [],
        (PER_RELEASE, 1),
    ),
    (
        "a-go-template-outside-a-chart",
        "t.yaml",
        pod(image="{{ .Image }}"),
        [],
        (FIXED, 1),
    ),
    ("plain-yaml", "t.yaml", pod(), [], (FIXED, 1)),
    (
        "templates-written-apart-keep-their-names",
        "t.yaml",
        pod(name="{{ .Release.Name }}"),
        ["--templates-out", "TMP/templates.yaml"],
        (FIXED, 0),
    ),
]


@pytest.mark.parametrize(
    ("where", "text", "flags", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_added_templates_are_named_per_release_in_helm_templates(
    tmp_path: Path, where: str, text: str, flags: list[str], expected: tuple[str, int]
) -> None:
    name, added = expected
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    if where.startswith("chart/"):
        (tmp_path / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 1.0.0\n")
    path.write_text(text)
    args = [f.replace("TMP", str(tmp_path)) for f in flags]
    result = CliRunner().invoke(main, ["migrate", "--write", *args, str(path)])
    assert result.exit_code == 0, result.stderr
    out = path.read_text()
    assert out.count("kind: ResourceClaimTemplate") == added, out
    assert re.findall(r"^  name: (.*dragate-gpu.*)$", out, re.M) == [name] * added, out
    references = re.findall(r"resourceClaimTemplateName: (.*)$", out, re.M)
    assert references and set(references) == {name}, out
    again = CliRunner().invoke(main, ["migrate", "--write", *args, str(path)])
    assert again.exit_code == 0 and path.read_text() == out
