"""`kubectl dragate why` on the real control plane, run as the user runs it (the
`kubectl-dragate` console script with `--kubeconfig`), with kube-scheduler as the oracle.

A Pod whose claim asks for a product no slice has stays Unschedulable: `why` names the
request and the selector that rules the devices out, and quotes the scheduler's own
FailedScheduling event as the scheduler wrote it. A Pod that fits is "scheduled on" the node
the scheduler chose, and its claim is allocated and reserved for it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .cluster import Cluster, running_cluster
from .dragate_server import serving
from .processes import wait_for
from .scheduling import BOUND, UNSCHEDULABLE, force_delete, pod_outcome, publish_inventory
from .toolchain_bins import require_binaries

pytestmark = pytest.mark.e2e

NS = "why"
CLASS = "gpu.nvidia.com"
MISSING = f"device.attributes['{CLASS}'].productName == 'NVIDIA Z999'"
POLICIES = f"""
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: why}}
spec:
  namespaces: [{NS}]
  quota:
  - {{deviceClassName: {CLASS}, maxDevices: 3}}
"""
PLUGIN = str(Path(sys.executable).with_name("kubectl-dragate"))
if not Path(PLUGIN).exists():  # pragma: no cover - a venv without the script next to python
    PLUGIN = shutil.which("kubectl-dragate") or "kubectl-dragate"


def gpu_claim(name: str, count: int = 1, *selectors: str) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": CLASS, "allocationMode": "ExactCount",
                               "count": count}  # fmt: skip
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def claim_pod(name: str, claim: str) -> dict[str, Any]:
    container = {"name": "cuda", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [container],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]},
    }  # fmt: skip


def create(cluster: Cluster, *objects: dict[str, Any]) -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    cluster.kubectl("create", "-f", "-", input=json.dumps(items))


@dataclass(frozen=True)
class Site:
    """The cluster, and the policy files `dragate serve` and `why --policies` read."""

    cluster: Cluster
    policies: Path


@pytest.fixture(scope="module")
def site(e2e_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """A 1.37 control plane with the scheduler, NVIDIA-shaped slices, and `dragate serve`
    keeping the tenant's ledger."""
    require_binaries(e2e_bin_dir, ("kube-scheduler",))
    with running_cluster(e2e_bin_dir, scheduler=True) as cluster:
        publish_inventory(cluster)
        create(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        policies = tmp_path_factory.mktemp("why-policies")
        (policies / "policies.yaml").write_text(POLICIES)
        with serving(cluster, policies, "dragate-why", gpu_claim("probe", 9), "limit 3"):
            yield Site(cluster, policies)


def why(site: Site, *args: str) -> list[dict[str, Any]]:
    """`kubectl-dragate why ARGS -n NS --kubeconfig ... -o json`, as a user types it."""
    command = [PLUGIN, "why", *args, "-n", NS, "--kubeconfig", str(site.cluster.kubeconfig),
               "--policies", str(site.policies), "-o", "json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def failed_scheduling(cluster: Cluster, pod: str) -> list[str]:
    events = cluster.get_json("events", "-n", NS, "--field-selector",
                              f"involvedObject.name={pod},reason=FailedScheduling")  # fmt: skip
    return [str(e["message"]) for e in events.get("items") or []]


def test_a_pod_whose_claim_no_device_matches_is_explained_with_the_schedulers_words(
    site: Site,
) -> None:
    cluster = site.cluster
    create(cluster, gpu_claim("z999", 1, MISSING), claim_pod("stuck", "z999"))
    outcome, pod = pod_outcome(cluster, NS, "stuck")
    assert outcome == UNSCHEDULABLE, pod.get("status")
    wait_for(lambda: bool(failed_scheduling(cluster, "stuck")), timeout=30, interval=0.5,
             what="the scheduler's FailedScheduling event")  # fmt: skip
    found = why(site, "stuck")
    first = found[0]
    assert (first["cause"], first["source"], first["blocking"]) == (
        "feasibility", f"ResourceClaim {NS}/z999", True), found  # fmt: skip
    assert first["message"].startswith(f"request 'gpu' needs 1 {CLASS} device, 0 in the cluster")
    assert f'selector "{MISSING}" rules out the most' in first["message"]
    quoted = [f["message"] for f in found if f["cause"] == "scheduler"]
    said = failed_scheduling(cluster, "stuck")
    assert any(q.removeprefix("FailedScheduling: ") in said for q in quoted), (quoted, said)
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert any(q.startswith(f"{condition['reason']}: ") for q in quoted), (quoted, condition)


def test_a_pod_that_fits_is_scheduled_on_the_schedulers_node_and_its_claim_reserved(
    site: Site,
) -> None:
    cluster = site.cluster
    create(cluster, gpu_claim("one", 1), claim_pod("fits", "one"))
    outcome, pod = pod_outcome(cluster, NS, "fits")
    assert outcome == BOUND, pod.get("status")
    node = pod["spec"]["nodeName"]
    scheduled = {"cause": "scheduled", "source": f"Pod {NS}/fits", "blocking": False,
                 "message": f"scheduled on {node}"}  # fmt: skip
    assert why(site, "pod/fits") == [scheduled]
    claim = why(site, "resourceclaim/one")
    assert claim[0]["cause"] == "claim" and claim[0]["source"] == f"ResourceClaim {NS}/one"
    assert claim[0]["message"].endswith(f"; reserved for Pod {NS}/fits"), claim
    assert claim[0]["message"].startswith(f"allocated: {CLASS}/{node}/"), claim
    quota = [f for f in claim if f["cause"] == "quota"]
    assert [f["source"] for f in quota] == ["Tenant why"], claim
    assert not quota[0]["blocking"], claim
    force_delete(cluster, NS, "pod/fits", "pod/stuck")


def test_a_claim_no_device_matches_says_so_with_its_quota(site: Site) -> None:
    found = why(site, "--claim", "z999")
    assert found[0]["cause"] == "feasibility" and found[0]["blocking"], found
    assert f'selector "{MISSING}"' in found[0]["message"]
    assert [f["cause"] for f in found][-1] == "quota", found
