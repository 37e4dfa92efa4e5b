"""Fixtures for the image tests: the built image (cached by input hash), the chart's pod.

The image is built by image/build.py (root, chroot, network on a cold build); the pod spec
is the Deployment that the real helm renders from charts/dragate with serve.inCluster=false
(no apiserver in the pod's own network namespace). DRAGATE_SKIP_IMAGE=1 skips these tests
(machines without root), DRAGATE_SKIP_E2E=1 the ones that need helm; otherwise a missing
prerequisite fails them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from e2e.toolchain_bins import ToolchainMissing, require_binaries, toolchain_bin_dir

from .container import PodSpec, configmap_dir
from .pod import REPO, Pod, build_image, write_serving_cert

CHART = REPO / "charts" / "dragate"


def require_image_prerequisites() -> None:
    if os.environ.get("DRAGATE_SKIP_IMAGE") == "1":
        pytest.skip("DRAGATE_SKIP_IMAGE=1: container image tests skipped")
    if os.geteuid() != 0:
        pytest.fail("the image tests need root (chroot, mount namespaces); "
                    "DRAGATE_SKIP_IMAGE=1 skips them", pytrace=False)  # fmt: skip


@pytest.fixture(scope="session")
def image_dir() -> Path:
    require_image_prerequisites()
    return build_image()


def render_deployment(*sets: str) -> PodSpec:
    if os.environ.get("DRAGATE_SKIP_E2E") == "1":
        pytest.skip("DRAGATE_SKIP_E2E=1: the pod spec is rendered by the toolchain's helm")
    try:
        helm = require_binaries(toolchain_bin_dir(), ("helm",)) / "helm"
    except ToolchainMissing as error:
        pytest.fail(str(error), pytrace=False)
    args = [arg for value in sets for arg in ("--set", value)]
    rendered = subprocess.run([str(helm), "template", "dragate", str(CHART), "-n",
                               "dragate-system", *args], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
    deployment = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment")
    return PodSpec.from_deployment(deployment)


@pytest.fixture(scope="session")
def chart_pod() -> PodSpec:
    return render_deployment("serve.inCluster=false", "webhook.replicas=1")


@pytest.fixture(scope="session")
def volume_sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """What the kubelet would project: the TLS Secret and the chart's policy ConfigMap."""
    base = tmp_path_factory.mktemp("volumes")
    write_serving_cert(base / "tls")
    policies = sorted((CHART / "files" / "policies").glob("*.yaml"))
    return {"tls": base / "tls", "policies": configmap_dir(policies, base / "policies")}


@pytest.fixture(scope="module")
def pod(image_dir: Path, chart_pod: PodSpec, volume_sources: dict[str, Path],
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pod]:  # fmt: skip
    running = Pod.start(image_dir, chart_pod, volume_sources, tmp_path_factory.mktemp("pod"))
    yield running
    running.stop()
