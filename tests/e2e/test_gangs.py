"""Gangs on the real control plane: the Job controller creates the Pods, the resourceclaim
controller their claims, and dragate charges each Job whole at its creation.

Two Jobs of 4 Pods x 2 GPUs for a tenant of 8 GPUs: the first is admitted whole and its four
Pods draw from its reservation; the second is refused at its creation with the numbers, never
split 2 + 2; a lone 1-GPU Pod is refused while the gang holds the quota. Deleting the first
Job frees its devices and the second then fits; a suspended Job is charged only when it is
unsuspended.
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

pytestmark = pytest.mark.e2e

NS = "gangs"
CLASS = "gpu.nvidia.com"
POLICIES = f"""
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: ml}}
spec:
  namespaces: [{NS}]
  quota:
  - {{deviceClassName: {CLASS}, maxDevices: 8}}
"""


def kubectl_json(cluster: Cluster, verb: str, obj: Any, *args: str, check: bool = True) -> Any:
    return cluster.kubectl(verb, "-f", "-", *args, input=json.dumps(obj), check=check)


def container(gpus: int) -> dict[str, Any]:
    return {"name": "train", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}


def job(name: str, *, suspend: bool = False) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [container(2)]}}
    spec = {"parallelism": 4, "completions": 4, "suspend": suspend, "template": template}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}  # fmt: skip


def lone_pod() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lone", "namespace": NS},
            "spec": {"containers": [container(1)]}}  # fmt: skip


@pytest.fixture(scope="module")
def gangs(e2e_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A control plane (the Job and resourceclaim controllers run in kube-controller-manager),
    the GPU DeviceClass, and `dragate serve` registered for Pods, claims and Jobs."""
    with running_cluster(e2e_bin_dir) as cluster:
        device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                        "metadata": {"name": CLASS}, "spec": {}}  # fmt: skip
        kubectl_json(cluster, "create", device_class)
        kubectl_json(cluster, "create", {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": NS}})  # fmt: skip
        policies = tmp_path_factory.mktemp("gang-policies")
        (policies / "policies.yaml").write_text(POLICIES)
        too_big = {**job("probe"), "spec": {**job("probe")["spec"], "parallelism": 5}}
        with serving(cluster, policies, "dragate-gangs", too_big, "needs 10"):
            yield cluster


def held(cluster: Cluster) -> dict[str, int]:
    """The tenant's holders in dragate's ledger: key -> GPUs (grants and wants left out)."""
    found = cluster.kubectl("get", "tenantusage", "ml", "-o", "json", "--ignore-not-found")
    if not found.stdout.strip():
        return {}
    records = records_of(json.loads(found.stdout))
    return {
        k: sum(r.devices.values())
        for k, r in records.items()
        if k.startswith(("pod:", "claim:", "gang:")) and sum(r.devices.values())
    }


def claims(cluster: Cluster) -> list[dict[str, Any]]:
    return list(cluster.get_json("resourceclaims", "-n", NS)["items"])


def test_the_first_gang_runs_whole_and_the_second_is_refused_at_creation(
    gangs: Cluster,
) -> None:
    cluster = gangs
    assert kubectl_json(cluster, "create", job("first")).returncode == 0
    refused = kubectl_json(cluster, "create", job("second"), check=False)
    assert refused.returncode != 0
    assert "gang gangs/second needs 8 gpu.nvidia.com; tenant ml has 0 free" in refused.stderr
    wait_for(lambda: len(claims(cluster)) == 4, timeout=60, interval=0.5,
             what="the Job's 4 Pods and their 4 claims")  # fmt: skip
    wait_for(lambda: sum(held(cluster).values()) == 8 and "gang:gangs/Job/first" not in
             held(cluster), timeout=30, interval=0.5, what="the Pods drawing the gang")  # fmt: skip
    assert all(sum(1 for _ in c["spec"]["devices"]["requests"]) for c in claims(cluster))
    lone = kubectl_json(cluster, "create", lone_pod(), check=False)
    assert lone.returncode != 0 and "limit 8" in lone.stderr, lone.stderr


def test_deleting_the_first_gang_lets_the_second_in_whole(gangs: Cluster) -> None:
    cluster = gangs
    cluster.kubectl("delete", "job", "first", "-n", NS, "--cascade=foreground", "--wait=true")
    wait_for(lambda: not claims(cluster) and not held(cluster), timeout=60, interval=0.5,
             what="the first gang's devices freed")  # fmt: skip
    assert kubectl_json(cluster, "create", job("second")).returncode == 0
    wait_for(lambda: sum(held(cluster).values()) == 8, timeout=30, interval=0.5,
             what="the second gang reserved")  # fmt: skip


def test_a_suspended_gang_is_charged_when_unsuspended(gangs: Cluster) -> None:
    cluster = gangs
    assert kubectl_json(cluster, "create", job("later", suspend=True)).returncode == 0
    resume = json.dumps({"spec": {"suspend": False}})
    refused = cluster.kubectl("patch", "job", "later", "-n", NS, "--type=merge", "-p", resume,
                              check=False)  # fmt: skip
    assert refused.returncode != 0
    assert "gang gangs/later needs 8 gpu.nvidia.com" in refused.stderr, refused.stderr
