"""`dragate migrate` never passes a legacy request it leaves: `--check` (and `--write`) exit 1
while one remains, each listed with `file:line` and why; the chart shapes it can migrate
(a licence header comment first, a body wrapped in `{{- if }}`) are migrated, checked against
golden files."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from webhook.cli import main

GOLDEN = Path(__file__).parent / "data" / "migrate" / "helm"
DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      containers:
        - name: server
          image: "{{ .Values.image }}"
          resources:
            limits:
              nvidia.com/gpu: COUNT
"""
CRD = """apiVersion: example.com/v1
kind: GpuRunner
metadata:
  name: runner
spec:
  worker:
    resources:
      limits:
        nvidia.com/gpu: 1
"""
VALUES = """image: vllm/vllm-openai
resources:
  limits:
    cpu: 4
    "nvidia.com/gpu": 1
tolerations:
  - key: nvidia.com/gpu
    operator: Exists
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["migrate", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


SHAPES = [
    (
        "licence-header",
        "deployment.yaml",
        (GOLDEN / "licence-header.yaml").read_text(),
        31,
        ": --write migrates it",
    ),
    (
        "wrapped-in-if",
        "deployment.yaml",
        (GOLDEN / "wrapped.yaml").read_text(),
        34,
        ": --write migrates it",
    ),
    (
        "templated-count",
        "deployment.yaml",
        DEPLOYMENT.replace("COUNT", "{{ .Values.gpus }}"),
        13,
        " left (templated count)",
    ),
    ("unknown-crd", "runner.yaml", CRD, 9, " left (unknown kind)"),
    ("values-file", "values.yaml", VALUES, 5, " left (values file)"),
    (
        "computed-name",
        "deployment.yaml",
        DEPLOYMENT.replace("nvidia.com/gpu: COUNT", '{{- $r := "nvidia.com/gpu" }}'),
        13,
        " left (resource name computed in a template)",
    ),
    (
        "unparseable-template",
        "deployment.yaml",
        DEPLOYMENT.replace("limits:", "limits:\n              {{ .Values.key }}: 1"),
        14,
        " left (template not migrated: {{ .Values.key }} stands in a key)",
    ),
]


@pytest.mark.parametrize(
    ("name", "text", "line", "says"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES]
)
def test_check_fails_and_lists_each_legacy_request(
    tmp_path: Path, name: str, text: str, line: int, says: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run("--check", str(path))
    assert code == 1, err
    assert f"{path}:{line}: nvidia.com/gpu{says}" in err
    assert path.read_text() == text


@pytest.mark.parametrize(
    ("name", "text", "line", "says"),
    [s[1:] for s in SHAPES if "left" in s[4]],
    ids=[s[0] for s in SHAPES if "left" in s[4]],
)
def test_write_leaves_them_and_exits_1(
    tmp_path: Path, name: str, text: str, line: int, says: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run("--write", str(path))
    assert code == 1, err
    assert f"{path}:{line}: nvidia.com/gpu{says}" in err
    assert err.splitlines()[-1].endswith("1 legacy request(s) left")
    dry, _, dry_err = run(str(path))
    assert dry == 0 and f"{path}:{line}: nvidia.com/gpu{says}" in dry_err


@pytest.mark.parametrize("name", ["licence-header", "wrapped", "empty-annotations"])
def test_chart_shapes_are_migrated(tmp_path: Path, name: str) -> None:
    path = tmp_path / "deployment.yaml"
    shutil.copy(GOLDEN / f"{name}.yaml", path)
    code, _, err = run("--write", str(path))
    assert code == 0, err
    assert path.read_text() == (GOLDEN / f"{name}.expected.yaml").read_text()
    again, _, err = run("--write", str(path))
    assert again == 0 and path.read_text() == (GOLDEN / f"{name}.expected.yaml").read_text()
    assert run("--check", str(path))[0] == 0


def test_a_warn_mapping_leaves_requests_the_gate_counts(tmp_path: Path) -> None:
    policies = Path(__file__).parent / "data" / "migrate" / "policies"
    path = tmp_path / "deployment.yaml"
    path.write_text(DEPLOYMENT.replace("COUNT", "1"))
    code, _, err = run("--check", "--policies", str(policies), str(path))
    assert code == 1
    assert f"{path}:13: nvidia.com/gpu left (the mapping's action is Warn)" in err


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    path = tmp_path / "deployment.yaml"
    path.write_text(DEPLOYMENT.replace("nvidia.com/gpu: COUNT", "cpu: 1"))
    (tmp_path / "values.yaml").write_text("tolerations:\n- key: nvidia.com/gpu\n")
    code, _, err = run("--check", str(tmp_path))
    assert code == 0, err
    assert " left (" not in err


MAPPING = """apiVersion: dragate.io/v1alpha1
kind: LegacyResourceMapping
metadata: {name: nvidia}
spec:
  action: ACTION
  resources:
  - {resourceName: nvidia.com/gpu, deviceClassName: gpu.nvidia.com}
"""


@pytest.mark.parametrize(
    ("action", "code", "said"),
    [
        pytest.param("Warn", 1, "nvidia.com/gpu left", id="warn"),
        pytest.param("Deny", 1, "nvidia.com/gpu left", id="deny"),
        pytest.param("Ignore", 0, "", id="ignore-keeps-it-on-purpose"),
    ],
)
def test_a_mapping_that_ignores_a_name_leaves_no_leftover(
    tmp_path: Path, action: str, code: int, said: str
) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "mapping.yaml").write_text(MAPPING.replace("ACTION", action))
    (tmp_path / "runner.yaml").write_text(CRD)
    args = ["migrate", "--check", "--policies", str(tmp_path / "policies"), str(tmp_path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, result.output
    assert said in result.output


READS = """{{- if index .Values.resources.limits "nvidia.com/gpu" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: shards
data:
  NUM_SHARD: {{ index .Values.resources.limits "nvidia.com/gpu" | quote }}
{{- end }}
"""


def test_a_template_reading_the_count_is_noted_and_passes(tmp_path: Path) -> None:
    path = tmp_path / "configmap.yaml"
    path.write_text(READS)
    code, _, err = run("--check", str(path))
    assert code == 0, err
    for line in (1, 7):
        assert f"{path}:{line}: nvidia.com/gpu: reads the count (no request)" in err
    assert " left (" not in err and "migrated request" not in err


def test_reads_of_a_migrated_count_are_named(tmp_path: Path) -> None:
    (tmp_path / "configmap.yaml").write_text(READS)
    (tmp_path / "deployment.yaml").write_text(DEPLOYMENT.replace("COUNT", "1"))
    code, _, err = run("--write", str(tmp_path))
    assert code == 0, err
    for line in (1, 7):
        assert (
            f"{tmp_path / 'configmap.yaml'}:{line}: nvidia.com/gpu: reads the count of a "
            "migrated request: change it to read the claim's count"
        ) in err


OWN_MAPPING = """apiVersion: dragate.io/v1alpha1
kind: LegacyResourceMapping
metadata: {name: nvidia}
spec:
  resources:
  - resourceName: nvidia.com/gpu
    deviceClassName: gpu.nvidia.com
  - resourceNamePrefix: nvidia.com/mig-
    deviceClassName: mig.nvidia.com
"""
SUITE = """apiVersion: dragate.io/v1alpha1
kind: PolicyTestSuite
metadata: {name: legacy}
spec:
  cases:
  - name: a legacy Pod is rewritten
    object:
      apiVersion: v1
      kind: Pod
      metadata: {name: p, namespace: a}
      spec:
        containers:
        - name: c
          image: i
          resources: {limits: {nvidia.com/gpu: 1}}
    expect: {allowed: true}
"""
OWN = [
    ("a-mapping", OWN_MAPPING, 0, []),
    ("a-test-suite", SUITE, 0, []),
    (
        "a-workload-beside-them",
        OWN_MAPPING + "---\n" + SUITE + "---\n" + DEPLOYMENT.replace("COUNT", "{{ .Values.gpus }}"),
        1,
        [40],
    ),
]


@pytest.mark.parametrize(("text", "code", "lines"), [c[1:] for c in OWN], ids=[c[0] for c in OWN])
def test_dragates_own_documents_hold_no_leftovers(
    tmp_path: Path, text: str, code: int, lines: list[int]
) -> None:
    """A policy names legacy resources and a test case sends them: neither is a request."""
    path = tmp_path / "policies.yaml"
    path.write_text(text)
    found, _, err = run("--check", str(path))
    assert found == code, err
    assert [int(n) for n in re.findall(rf"^{re.escape(str(path))}:(\d+): ", err, re.M)] == lines
    assert "PolicyTestSuite" not in err
