"""Device binding conditions (KEP-5007) on Kubernetes 1.37, with kube-scheduler as the oracle.

DRADeviceBindingConditions is beta and on by default from 1.36, DRAResourceClaimDeviceStatus
GA in 1.37, so the defaults suffice. The scheduler allocates a device with `bindingConditions`,
reserves the claim for the Pod and then holds the Pod at PreBind until every condition is True
in the claim's `status.devices`; a `bindingFailureConditions` entry reported True makes it give
up that attempt, deallocate the claim and allocate again. The allocator tries pools without
binding conditions first. The test plays the driver: it reports the conditions.

Nodes: `bind-0` publishes two A100 that wait for `dra.example.com/attached`; `mixed-0` one
plain A100 (pool `mixed-0`) and two waiting ones (pool `mixed-0-wait`). For each case dragate's
verdict (feasible, and whether it warns that the Pod waits) equals what the scheduler does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nvidia_shapes import A100, device_classes, gpu_devices, resource_slice

from webhook.engine.feasibility import binding_notes, check_claim
from webhook.engine.inventory import Inventory
from webhook.engine.normalize import claim_spec

from .cluster import Cluster, running_cluster
from .scheduling import (
    BOUND,
    UNSCHEDULABLE,
    WAITING,
    fake_node,
    force_delete,
    pending_conditions,
    pod_outcome,
)
from .toolchain_bins import require_binaries

pytestmark = pytest.mark.e2e

NS = "binding"
ATTACHED, FAILED = "dra.example.com/attached", "dra.example.com/failed"
ATTACH, FAIL = "attach", "fail"
REALLOCATION_TIMEOUT = 60.0
ON_BIND = "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-bind-0')"
ON_MIXED = "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-mixed-0')"


def waiting(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The devices, bound only once the driver reports ATTACHED; FAILED undoes the attempt."""
    return [
        {**d, "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}
        for d in devices
    ]


def pool(node: str, name: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    found = resource_slice(node, devices)
    found["metadata"] = {"name": f"{name}-slice"}
    found["spec"]["pool"]["name"] = name
    return found


def inventory_slices() -> list[dict[str, Any]]:
    return [
        pool("bind-0", "bind-0", waiting(gpu_devices("bind-0", A100, 2))),
        pool("mixed-0", "mixed-0", gpu_devices("mixed-0", A100, 1)),
        pool("mixed-0", "mixed-0-wait", waiting(gpu_devices("mixed-0", A100, 2, first=1))),
    ]


@pytest.fixture(scope="module")
def binding(e2e_bin_dir: Path) -> Iterator[tuple[Cluster, list[dict[str, Any]]]]:
    require_binaries(e2e_bin_dir, ("kube-scheduler",))
    with running_cluster(e2e_bin_dir, scheduler=True) as cluster:
        for node in ("bind-0", "mixed-0"):
            fake_node(cluster, node)
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
        items = [*device_classes(), *inventory_slices(), namespace]
        cluster.kubectl(
            "create",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
        )
        yield cluster, cluster.get_json("resourceslices")["items"]


def exact(count: int, selector: str) -> dict[str, Any]:
    return {"name": "gpu", "exactly": leaf(count, selector)}


def leaf(count: int, selector: str) -> dict[str, Any]:
    selectors = [{"cel": {"expression": selector}}]
    return {"deviceClassName": "gpu.nvidia.com", "count": count, "selectors": selectors}


def first_available(*selectors: str) -> dict[str, Any]:
    subs = [{"name": f"s{i}", **leaf(1, s)} for i, s in enumerate(selectors)]
    return {"name": "gpu", "firstAvailable": subs}


TABLE: list[tuple[str, dict[str, Any], str, tuple[str, ...]]] = [
    ("only-waiting-devices-attach", exact(1, ON_BIND), WAITING, (ATTACH,)),
    ("only-waiting-devices-fail-then-attach", exact(1, ON_BIND), WAITING, (FAIL, ATTACH)),
    ("all-waiting-devices", exact(2, ON_BIND), WAITING, (ATTACH,)),
    ("plain-pool-first", exact(1, ON_MIXED), BOUND, ()),
    ("plain-pool-too-small", exact(2, ON_MIXED), WAITING, (ATTACH,)),
    ("more-than-the-node-has", exact(4, ON_MIXED), UNSCHEDULABLE, ()),
    ("first-alternative-plain", first_available(ON_MIXED, ON_BIND), BOUND, ()),
    ("first-alternative-waits", first_available(ON_BIND, ON_MIXED), WAITING, (ATTACH,)),
]


def verdict(slices: list[dict[str, Any]], claim: dict[str, Any]) -> str:
    """dragate's answer: infeasible, or feasible and warned that the Pod waits, or neither."""
    inventory = Inventory.from_slices(slices)
    classes = {c["metadata"]["name"]: c for c in device_classes()}
    spec = claim_spec(claim, "c")
    if not all(r.ok for r in check_claim(inventory, spec, classes)):
        return UNSCHEDULABLE
    return WAITING if binding_notes(inventory, spec, classes) else BOUND


@pytest.mark.parametrize("case", TABLE, ids=[row[0] for row in TABLE])
def test_dragate_warns_of_the_wait_exactly_when_the_scheduler_holds_the_pod(
    binding: tuple[Cluster, list[dict[str, Any]]],
    case: tuple[str, dict[str, Any], str, tuple[str, ...]],
) -> None:
    """The Pod waits iff dragate warns; the driver's reports then bind it, or (a failure)
    make the scheduler allocate again and wait again, as the warning says."""
    name, device_request, expected, driver = case
    cluster, slices = binding
    claim = gpu_claim(name, device_request)
    said = verdict(slices, claim)
    create_claim_and_pod(cluster, claim, name)
    try:
        outcome, pod = pod_outcome(cluster, NS, name)
        assert (said, outcome) == (expected, expected), said_by_scheduler(pod)
        for step in driver:
            play_driver(cluster, name, step)
    finally:
        release(cluster, name)
        force_delete(cluster, NS, f"pod/{name}")
        cluster.kubectl("delete", "resourceclaim", name, "-n", NS, "--wait=true", "--timeout=60s")


def play_driver(cluster: Cluster, name: str, step: str) -> None:
    """ATTACH: report every binding condition True, and the Pod binds. FAIL: report the failure
    condition, and the scheduler deallocates the claim, allocates it again and waits again."""
    claim = cluster.get_json("resourceclaim", name, "-n", NS)
    if step == ATTACH:
        report(cluster, claim, ATTACHED)
        outcome, pod = pod_outcome(cluster, NS, name)
        assert outcome == BOUND, said_by_scheduler(pod)
        return
    report(cluster, claim, FAILED)
    reallocated(cluster, name, claim["status"]["allocation"]["allocationTimestamp"])
    outcome, pod = pod_outcome(cluster, NS, name)
    assert outcome == WAITING, said_by_scheduler(pod)


def said_by_scheduler(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    return json.dumps([status.get("nominatedNodeName"), status.get("conditions")])


def release(cluster: Cluster, name: str) -> None:
    """Let a Pod the scheduler still holds at PreBind bind, so no allocation it has in flight
    outlives the case (deleting the Pod leaves PreBind waiting until its timeout)."""
    claim = cluster.get_json("resourceclaim", name, "-n", NS)
    if pending_conditions(claim):
        report(cluster, claim, ATTACHED)
        pod_outcome(cluster, NS, name)


def report(cluster: Cluster, claim: dict[str, Any], condition: str) -> None:
    """What the driver writes: `condition` True on every allocated device."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results = claim["status"]["allocation"]["devices"]["results"]
    devices = [
        {
            "driver": r["driver"],
            "pool": r["pool"],
            "device": r["device"],
            "conditions": [
                {
                    "type": condition,
                    "status": "True",
                    "reason": "Reported",
                    "message": "e2e driver",
                    "lastTransitionTime": now,
                }
            ],
        }
        for r in results
    ]
    patch = json.dumps({"status": {"devices": devices}})
    cluster.kubectl(
        "patch", "resourceclaim", claim["metadata"]["name"], "-n", NS,
        "--subresource=status", "--type=merge", "-p", patch,
    )  # fmt: skip


def reallocated(cluster: Cluster, name: str, before: str) -> dict[str, Any]:
    """The claim once allocated again after `before`, its device status cleared."""
    deadline = time.monotonic() + REALLOCATION_TIMEOUT
    claim: dict[str, Any] = {}
    while time.monotonic() < deadline:
        claim = cluster.get_json("resourceclaim", name, "-n", NS)
        allocation = (claim.get("status") or {}).get("allocation") or {}
        stamp = allocation.get("allocationTimestamp")
        if stamp and stamp != before and pending_conditions(claim):
            return claim
        time.sleep(0.5)
    raise AssertionError(f"claim {name} not allocated again: {claim.get('status')}")


def gpu_claim(name: str, device_request: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": [device_request]}},
    }


def create_claim_and_pod(cluster: Cluster, claim: dict[str, Any], name: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "d"}]}}],
            "resourceClaims": [{"name": "d", "resourceClaimName": name}],
        },
    }
    items = {"apiVersion": "v1", "kind": "List", "items": [claim, pod]}
    cluster.kubectl("create", "-f", "-", input=json.dumps(items))
