"""dragate from the container image's root filesystem (not the host venv) against the real
kube-apiserver: the pod spec the chart renders (read-only root, uid 65532, emptyDirs, the TLS
Secret, the policy ConfigMap, plus a kubeconfig Secret as extra volume), run by
tests/image/container.py on the host network, registered through the chart in url mode.

One scenario end to end: an over-the-per-claim-limit claim is denied, a claim within quota
is admitted and lands in the TenantUsage ledger (written by the image's kubernetes client),
and the next claim over the tenant's total is denied with the numbers.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from image.container import PodSpec, configmap_dir
from image.pod import Pod, build_image, write_serving_cert

from .cluster import Cluster
from .dragate_server import CHART, CRD, DATA, install_chart, resource_slice, scenario_policies
from .processes import free_port, wait_for
from .test_scenarios import claim, denial, holders, kubectl_input

pytestmark = pytest.mark.e2e

RELEASE = "dragate-img"
NAMESPACE = "img-quota"
SLICE = resource_slice("img-node", gpus=4)
TENANT = {
    "apiVersion": "dragate.io/v1alpha1", "kind": "Tenant", "metadata": {"name": NAMESPACE},
    "spec": {"namespaces": [NAMESPACE], "allowedDeviceClasses": ["gpu.nvidia.com"],
             "quota": [{"deviceClassName": "gpu.nvidia.com", "maxDevices": 2,
                        "maxDevicesPerClaim": 2}]},
}  # fmt: skip
KUBE_MOUNT = "/etc/dragate/kube"


def render_pod(cluster: Cluster, port: int) -> PodSpec:
    """The chart's Deployment, serving on the host's loopback, cluster mode via a kubeconfig."""
    sets = [
        "serve.inCluster=false", "webhook.replicas=1", "serve.host=127.0.0.1",
        f"serve.port={port}", "serve.gracefulTimeoutSeconds=5",
        f"deployment.extraArgs[0]=--kubeconfig={KUBE_MOUNT}/kubeconfig",
        "deployment.extraVolumes[0].name=kubeconfig",
        "deployment.extraVolumes[0].secret.secretName=dragate-kubeconfig",
        "deployment.extraVolumeMounts[0].name=kubeconfig",
        f"deployment.extraVolumeMounts[0].mountPath={KUBE_MOUNT}",
        "deployment.extraVolumeMounts[0].readOnly=true",
    ]  # fmt: skip
    args = [arg for value in sets for arg in ("--set", value)]
    rendered = cluster.helm("template", RELEASE, str(CHART), "-n", RELEASE, *args).stdout
    deployment = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment")
    return PodSpec.from_deployment(deployment)


def volume_sources(cluster: Cluster, base: Path) -> dict[str, Path]:
    policies = scenario_policies(base / "policy-files")
    (policies / "img-tenant.yaml").write_text(json.dumps(TENANT))
    kube = base / "kubeconfig"
    kube.mkdir()
    shutil.copy(cluster.kubeconfig, kube / "kubeconfig")
    write_serving_cert(base / "tls")
    return {
        "tls": base / "tls",
        "policies": configmap_dir(sorted(policies.glob("*.yaml")), base / "policies"),
        "kubeconfig": kube,
    }


@pytest.fixture(scope="module")
def image_pod(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pod]:
    if os.environ.get("DRAGATE_SKIP_IMAGE") == "1" or os.geteuid() != 0:
        pytest.skip("the image's rootfs needs root to run (DRAGATE_SKIP_IMAGE=1 or not root)")
    image_dir = build_image()
    cluster.kubectl("apply", "-f", str(CRD))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    "crd/tenantusages.dragate.io")  # fmt: skip
    classes_before = cluster.kubectl("get", "deviceclasses", "-o", "name").stdout.split()
    cluster.apply((DATA / "inventory.yaml").read_text() + f"---\n{json.dumps(SLICE)}\n")
    cluster.kubectl("create", "namespace", NAMESPACE)
    base = tmp_path_factory.mktemp("image-pod")
    pod: Pod | None = None
    try:
        port = free_port()
        pod = Pod.start(image_dir, render_pod(cluster, port), volume_sources(cluster, base),
                        base, own_net=False)  # fmt: skip
        ca = (base / "tls" / "ca.crt").read_bytes()
        install_chart(cluster, RELEASE, RELEASE, f"https://127.0.0.1:{port}", ca)
        yield pod
    finally:
        cluster.helm("uninstall", RELEASE, "--namespace", RELEASE, check=False)
        if pod is not None:
            pod.stop()
        cluster.kubectl("delete", "namespace", NAMESPACE, RELEASE, "--wait=false",
                        "--ignore-not-found", check=False)  # fmt: skip
        cluster.kubectl("delete", "tenantusage", NAMESPACE, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "resourceslice", SLICE["metadata"]["name"],
                        "--ignore-not-found", check=False)  # fmt: skip
        if not classes_before:  # leave the cluster's DeviceClasses as they were
            cluster.kubectl("delete", "-f", str(DATA / "inventory.yaml"), "--ignore-not-found",
                            "--wait=false", check=False)  # fmt: skip


def test_image_rootfs_judges_claims_and_keeps_the_ledger(cluster: Cluster, image_pod: Pod) -> None:
    assert "/opt/dragate/bin/python" in Path(f"/proc/{image_pod.pid}/cmdline").read_text()
    three = claim("three", 3)

    def per_claim_limit_denied() -> bool:
        result = kubectl_input(cluster, "create", three, NAMESPACE, "--dry-run=server")
        return f"tenant '{NAMESPACE}' allows at most 2 per claim" in result.stderr

    wait_for(per_claim_limit_denied, timeout=60, interval=0.5, what="dragate (image) to judge")

    admitted = kubectl_input(cluster, "create", claim("two", 2), NAMESPACE)
    assert admitted.returncode == 0, admitted.stderr
    wait_for(lambda: bool(holders(cluster, NAMESPACE)), timeout=30, interval=0.3,
             what="the TenantUsage ledger entry")  # fmt: skip
    assert sum(d["gpu.nvidia.com"] for d in holders(cluster, NAMESPACE).values()) == 2

    over = kubectl_input(cluster, "create", claim("one-more", 1), NAMESPACE)
    assert "used 2 + requested 1 > limit 2" in denial(over)
