"""Kubernetes judges a migrated Helm chart: the chart of tests/e2e/data/gpu-chart, whose
templates have the shapes of public charts (a licence header comment first, a body wrapped in
`{{- if .Values.gpu.enabled }}`, `{{- with }}` blocks, `include ... | nindent`), is migrated in
place, rendered by the real `helm template` with several value sets, and every rendered object
passes `kubectl apply --dry-run=server` on the real kube-apiserver, with the DeviceClasses the
claims name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from webhook.cli import main

from .cluster import Cluster

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent
GOLDEN = HERE.parent / "cli" / "data" / "migrate" / "helm"
VALUE_SETS = [
    ("defaults", []),
    (
        "nothing-optional",
        ["--set-json", "podAnnotations={}", "--set-json", "tolerations=[]",
         "--set-json", "nodeSelector={}"],
    ),
    (
        "everything-set",
        ["--set-json", 'affinity={"nodeAffinity":{}}',
         "--set-json", 'imagePullSecrets=[{"name":"registry"}]'],
    ),
]  # fmt: skip


@pytest.fixture
def chart(tmp_path: Path) -> Path:
    root = tmp_path / "gpu-chart"
    shutil.copytree(HERE / "data" / "gpu-chart", root)
    shutil.copy(GOLDEN / "licence-header.yaml", root / "templates" / "deployment.yaml")
    shutil.copy(GOLDEN / "wrapped.yaml", root / "templates" / "server.yaml")
    return root


@pytest.mark.parametrize("flags", [v[1] for v in VALUE_SETS], ids=[v[0] for v in VALUE_SETS])
def test_migrated_chart_renders_and_the_server_accepts_it(
    cluster: Cluster, chart: Path, flags: list[str]
) -> None:
    result = CliRunner().invoke(main, ["migrate", "--write", str(chart)])
    assert result.exit_code == 0, result.output
    assert "migrated 2 file(s)" in result.stderr
    assert CliRunner().invoke(main, ["migrate", "--check", str(chart)]).exit_code == 0
    rendered = cluster.helm("template", "rel", str(chart), "--namespace", "charted", *flags)
    objects = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    kinds = sorted(d["kind"] for d in objects)
    assert kinds == ["Deployment", "Deployment", "ResourceClaimTemplate", "ResourceClaimTemplate"]
    for deployment in (d for d in objects if d["kind"] == "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert "nvidia.com/gpu" not in str(pod["containers"][0]["resources"])
        assert pod["resourceClaims"][0]["resourceClaimTemplateName"].startswith("rel-dragate-gpu-")
    cluster.apply((HERE / "data" / "inventory.yaml").read_text())
    cluster.kubectl("create", "namespace", "charted", check=False)
    applied = cluster.kubectl(
        "apply", "--dry-run=server", "--validate=strict", "-n", "charted", "-f", "-",
        input=rendered.stdout,
    )  # fmt: skip
    assert applied.stdout.count("(server dry run)") == len(objects), applied.stdout
