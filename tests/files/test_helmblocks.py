"""A migrated Helm template keeps its edits in the GPU lines' template block, or is refused.

Driven through `dragate migrate`, the one caller: each case is a template, the lines the
migrated text must hold in order (or the refusal it must report)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from webhook.cli import main
from webhook.files.gotemplates import mask
from webhook.files.helmblocks import kinds, lines_of

HEAD = """apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
    - name: c
      image: i
      resources:
"""


def migrate(tmp_path: Path, text: str) -> tuple[int, str, str]:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["migrate", "--write", str(path)])
    return result.exit_code, path.read_text(), result.stderr


PLACED = [
    (
        "past-a-with-block-end",
        HEAD + "        limits:\n          nvidia.com/gpu: 1\n"
        "  {{- with .Values.nodeSelector }}\n  nodeSelector:\n    {{- toYaml . | nindent 4 }}\n"
        "  {{- end }}\n",
        ["  {{- end }}", "  resourceClaims:"],
    ),
    (
        "past-an-include-that-fills-the-key-above",
        HEAD + "        limits:\n          nvidia.com/gpu: 1\n"
        '  tolerations:\n    {{- include "t" . | nindent 4 }}\n',
        ['    {{- include "t" . | nindent 4 }}', "  resourceClaims:"],
    ),
    (
        "inside-a-body-wrapped-in-if",
        "{{- if .Values.on }}\n" + HEAD + "        limits:\n          nvidia.com/gpu: 1\n"
        "{{- end }}\n",
        ["  resourceClaims:", "---", "kind: ResourceClaimTemplate", "{{- end }}"],
    ),
    (
        "a-new-document-inside-the-guard-past-a-with-block",
        "{{- if .Values.on }}\n" + HEAD + "        limits:\n          nvidia.com/gpu: 1\n"
        "  {{- with .Values.tolerations }}\n  tolerations:\n    {{- toYaml . | nindent 4 }}\n"
        "  {{- end }}\n{{- end }}\n---\napiVersion: v1\nkind: Service\n",
        ["  {{- end }}", "---", "kind: ResourceClaimTemplate", "{{- end }}", "kind: Service"],
    ),
]


@pytest.mark.parametrize(("text", "order"), [c[1:] for c in PLACED], ids=[c[0] for c in PLACED])
def test_new_entries_land_in_the_gpu_lines_block(
    tmp_path: Path, text: str, order: list[str]
) -> None:
    code, out, err = migrate(tmp_path, text)
    assert code == 0, err
    lines = out.splitlines()
    at = [lines.index(o) for o in order]
    assert at == sorted(at), out
    for line in text.splitlines():
        if line.lstrip().startswith("{{"):
            assert line in lines  # every action line kept byte for byte


REFUSED = [
    (
        "gpu-under-a-condition",
        HEAD + "        limits:\n          {{- if .Values.gpu }}\n          nvidia.com/gpu: 1\n"
        "          {{- end }}\n",
        "the edit would move the template line 11",
    ),
    (
        "gpu-lines-in-two-blocks",
        HEAD + "        limits:\n          nvidia.com/gpu: 1\n    {{- if .Values.b }}\n"
        "    - name: b\n      image: i\n      resources:\n        limits:\n"
        "          nvidia.com/gpu: 1\n    {{- end }}\n",
        "lie in different template blocks",
    ),
    (
        "entry-after-a-right-trimming-action",
        HEAD + "        limits:\n          nvidia.com/gpu: 1\n  {{- if .Values.x -}}\n"
        "  hostNetwork: true\n  {{- end -}}\n",
        "which trims it (-}})",
    ),
    (
        "removed-key-filled-by-an-include",
        HEAD + "        limits:\n          nvidia.com/gpu: 1\n"
        '          {{- include "more" . | nindent 10 }}\n',
        "line 10 would go, but the template line 12 fills it",
    ),
]


@pytest.mark.parametrize(("text", "why"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_template_the_edit_would_break_is_left_as_it_is(
    tmp_path: Path, text: str, why: str
) -> None:
    code, out, err = migrate(tmp_path, text)
    assert out == text
    assert code == 1
    assert why in err and "nvidia.com/gpu left (template not migrated: " in err


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("{{- if .A }}", ["open"]),
        ("{{- else if .B }}", ["branch"]),
        ("{{- end }}{{- end }}", ["end", "end"]),
        ("{{- /* a */ -}}", ["quiet"]),
        ("{{- $x := .A }}", ["quiet"]),
        ('{{- include "x" . | nindent 4 }}', ["output"]),
        ("{{- range $k, $v := .A }}", ["open"]),
    ],
)
def test_action_kinds(action: str, expected: list[str]) -> None:
    masked = mask(f"a: 1\n{action}\n")
    assert [kinds(a) for a in masked.actions] == [expected]


def test_blocks_nest_and_branch() -> None:
    text = "{{- if .A }}\na: 1\n{{- else }}\nb: 1\n{{- end }}\nc: 1\n"
    masked = mask(text)
    contexts = [line.context for line in lines_of(masked.text, masked)]
    assert contexts[1] == ((0, 0),) and contexts[3] == ((0, 1),) and contexts[5] == ()
