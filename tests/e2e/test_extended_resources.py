"""KEP-5004 on the real control plane: a DeviceClass maps `nvidia.com/gpu`, and a legacy Pod
keeps its request for kube-scheduler to satisfy with DRA devices.

The oracles are kube-scheduler (it binds the Pod through the special claim it creates and
records in `status.extendedResourceClaimStatus`) and ResourceQuota (its count of the same
objects). dragate charges the Pod at its CREATE, the special claim consumes that reservation,
the tenant's ledger holds the Pod's devices exactly once and equals ResourceQuota's count, and
a second Pod over quota is refused at its CREATE with the numbers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from webhook.ledger.tenantusage import records_of

from .cluster import Cluster, running_cluster
from .dragate_server import serving
from .processes import wait_for
from .scheduler_cases import quota_key
from .scheduling import BOUND, force_delete, pod_outcome, publish_inventory
from .toolchain_bins import require_binaries

pytestmark = pytest.mark.e2e

NS = "native"
CLASS = "gpu.nvidia.com"
SPECIAL = "resource.kubernetes.io/extended-resource-claim"
POLICIES = f"""
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: native}}
spec:
  namespaces: [{NS}]
  quota:
  - {{deviceClassName: {CLASS}, maxDevices: 3}}
"""


def kubectl_json(cluster: Cluster, verb: str, obj: Any, *args: str, check: bool = True) -> Any:
    return cluster.kubectl(verb, "-f", "-", *args, input=json.dumps(obj), check=check)


def legacy_pod(name: str, gpus: int) -> dict[str, Any]:
    container = {"name": "cuda", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [container]},
    }


@pytest.fixture(scope="module")
def native(e2e_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A 1.37 control plane with the scheduler, NVIDIA-shaped slices, `gpu.nvidia.com`
    declaring `extendedResourceName: nvidia.com/gpu`, a ResourceQuota that only counts, and
    `dragate serve` registered as the validating and mutating webhook."""
    require_binaries(e2e_bin_dir, ("kube-scheduler",))
    with running_cluster(e2e_bin_dir, scheduler=True) as cluster:
        publish_inventory(cluster)
        mapped = json.dumps({"spec": {"extendedResourceName": "nvidia.com/gpu"}})
        cluster.kubectl("patch", "deviceclass", CLASS, "--type=merge", "-p", mapped)
        _namespace_with_quota(cluster)
        policies = tmp_path_factory.mktemp("native-policies")
        (policies / "policies.yaml").write_text(POLICIES)
        with serving(cluster, policies, "dragate-native", legacy_pod("probe", 9), "limit 3"):
            yield cluster


def _namespace_with_quota(cluster: Cluster) -> None:
    kubectl_json(cluster, "create", {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": NS}})  # fmt: skip
    hard = {quota_key(CLASS): "100", "requests.nvidia.com/gpu": "100"}
    quota = {"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"name": "dra", "namespace": NS}, "spec": {"hard": hard}}  # fmt: skip
    kubectl_json(cluster, "create", quota)
    wait_for(
        lambda: bool(cluster.get_json("resourcequota", "dra", "-n", NS).get("status", {})
                     .get("hard")),
        timeout=60, interval=0.5, what="ResourceQuota status",
    )  # fmt: skip


def ledger_devices(cluster: Cluster) -> dict[str, dict[str, int]]:
    """The tenant's holders as dragate's ledger stores them (grants and wants left out)."""
    records = records_of(cluster.get_json("tenantusage", "native"))
    return {k: dict(r.devices) for k, r in records.items() if k.startswith(("pod:", "claim:"))}


def quota_used(cluster: Cluster) -> int:
    used = cluster.get_json("resourcequota", "dra", "-n", NS).get("status", {}).get("used", {})
    return int(used.get(quota_key(CLASS), "0"))


def test_a_native_pod_is_bound_through_the_special_claim_and_charged_once(
    native: Cluster,
) -> None:
    cluster = native
    created = kubectl_json(cluster, "create", legacy_pod("first", 2))
    assert "a DeviceClass maps it" in created.stderr, created.stderr
    outcome, pod = pod_outcome(cluster, NS, "first")
    assert outcome == BOUND, pod.get("status")
    assert "resourceClaims" not in pod["spec"], "Auto keeps a name the class maps"
    status = pod["status"].get("extendedResourceClaimStatus") or {}
    special = cluster.get_json("resourceclaim", status["resourceClaimName"], "-n", NS)
    assert special["metadata"]["annotations"][SPECIAL] == "true"
    holder = f"pod:{pod['metadata']['uid']}/<extended-resources>"

    def settled() -> bool:
        return ledger_devices(cluster) == {holder: {CLASS: 2}} and quota_used(cluster) == 2

    wait_for(settled, timeout=30, interval=0.5, what="dragate's ledger and ResourceQuota")
    assert ledger_devices(cluster) == {holder: {CLASS: 2}}
    assert quota_used(cluster) == 2, "dragate's count equals ResourceQuota's"


def test_a_second_native_pod_over_quota_is_refused_with_the_numbers(native: Cluster) -> None:
    cluster = native
    refused = kubectl_json(cluster, "create", legacy_pod("second", 2), check=False)
    assert refused.returncode != 0
    assert "used 2 + requested 2 > limit 3" in refused.stderr, refused.stderr
    assert "pod:native/first/<extended-resources> (2)" in refused.stderr, refused.stderr
    force_delete(cluster, NS, "pod/first")
