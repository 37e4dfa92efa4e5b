"""A migrated chart installs as several releases side by side, and a template `dragate migrate`
added renders exactly when its workload does.

The chart of tests/e2e/data/gpu-chart gets one workload guarded by `{{- if .Values.gpu.enabled }}`
and one unguarded, is migrated in place, then rendered by the real `helm template` with the
guard on and off, and installed twice into one namespace by the real `helm install` on the
real kube-apiserver."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from webhook.cli import main

from .cluster import Cluster

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent
GOLDEN = HERE.parent / "cli" / "data" / "migrate" / "helm"


@pytest.fixture
def chart(tmp_path: Path) -> Path:
    root = tmp_path / "gpu-chart"
    shutil.copytree(HERE / "data" / "gpu-chart", root)
    shutil.copy(GOLDEN / "licence-header.yaml", root / "templates" / "deployment.yaml")
    shutil.copy(GOLDEN / "wrapped.yaml", root / "templates" / "server.yaml")
    result = CliRunner().invoke(main, ["migrate", "--write", str(root)])
    assert result.exit_code == 0, result.output
    return root


def template_names(deployment: dict[str, Any]) -> list[str]:
    claims = deployment["spec"]["template"]["spec"].get("resourceClaims", [])
    return [c["resourceClaimTemplateName"] for c in claims]


@pytest.mark.parametrize(
    ("enabled", "deployments"), [("true", 2), ("false", 1)], ids=["guard-on", "guard-off"]
)
def test_an_added_template_renders_exactly_when_its_workload_does(
    cluster: Cluster, chart: Path, enabled: str, deployments: int
) -> None:
    flags = ["--set", f"gpu.enabled={enabled}"]
    rendered = cluster.helm("template", "rel", str(chart), "--namespace", "charted", *flags)
    objects = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    workloads = [d for d in objects if d["kind"] == "Deployment"]
    templates = [d["metadata"]["name"] for d in objects if d["kind"] == "ResourceClaimTemplate"]
    assert len(workloads) == deployments
    referenced = [name for d in workloads for name in template_names(d)]
    assert sorted(templates) == sorted(referenced), rendered.stdout
    assert all(name.startswith("rel-dragate-gpu-") for name in templates)


def test_two_releases_of_a_migrated_chart_install_into_one_namespace(
    cluster: Cluster, chart: Path
) -> None:
    namespace = "two-releases"
    cluster.apply((HERE / "data" / "inventory.yaml").read_text())
    cluster.kubectl("create", "namespace", namespace, check=False)
    for release in ("alpha", "beta"):
        cluster.helm("install", release, str(chart), "--namespace", namespace)
    templates = cluster.get_json("resourceclaimtemplates", "-n", namespace)["items"]
    names = {t["metadata"]["name"] for t in templates}
    assert len(names) == 4, names
    deployments = cluster.get_json("deployments", "-n", namespace)["items"]
    assert len(deployments) == 4
    for deployment in deployments:
        release = deployment["metadata"]["annotations"]["meta.helm.sh/release-name"]
        referenced = template_names(deployment)
        assert len(referenced) == 1 and referenced[0].startswith(f"{release}-dragate-gpu-")
        assert referenced[0] in names
