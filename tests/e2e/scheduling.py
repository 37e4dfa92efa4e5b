"""A control plane with kube-scheduler, fake Ready Nodes and NVIDIA-shaped ResourceSlices.

No kubelet runs, so a Pod never starts; but the scheduler binds it (`spec.nodeName`) after the
DRA plugin allocated its claims on the published devices, or marks it Unschedulable. That is
the oracle for "would this Pod (claim) fit", which dragate's rewrite and feasibility must match.
A Pod whose allocated devices carry binding conditions (KEP-5007) is neither: the scheduler
holds it at PreBind, its claims allocated and reserved for it, until the driver reports the
conditions in the claim's `status.devices` (WAITING).
"""

from __future__ import annotations

import json
import time
from typing import Any

from nvidia_shapes import NODES, cluster_slices, device_classes

from .cluster import Cluster

OUTCOME_TIMEOUT = 45.0
BOUND, UNSCHEDULABLE, WAITING = "bound", "unschedulable", "waiting to bind"
RESERVED = "reserved"
NOT_PLACED = ("Unschedulable", "SchedulerError")
"""SchedulerError: the DRA plugin failed the claim outright (over 32 devices, a CEL runtime
error); the scheduler retries, but the Pod is never placed."""


def fake_node(cluster: Cluster, name: str) -> None:
    """A Node with allocatable CPU/memory/pods and a Ready condition (no kubelet behind it)."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
    }
    cluster.kubectl("create", "-f", "-", input=json.dumps(node))
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    resources = {"cpu": "64", "memory": "512Gi", "pods": "250"}
    status = {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "fake",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        }
    }
    cluster.kubectl(
        "patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(status)
    )
    # The TaintNodesByCondition admission plugin taints every new Node not-ready; no node
    # lifecycle controller runs to lift it, so lift it here.
    cluster.kubectl(
        "patch",
        "node",
        name,
        "--type=json",
        "-p",
        '[{"op": "remove", "path": "/spec/taints"}]',
        check=False,
    )


def publish_inventory(cluster: Cluster) -> list[dict[str, Any]]:
    """NVIDIA's DeviceClasses, one Ready Node per slice, the slices; returns the slices."""
    for name in NODES:
        fake_node(cluster, name)
    slices = cluster_slices()
    stored = [{**s, "metadata": {"name": s["metadata"]["name"]}} for s in slices]
    items = [*device_classes(), *stored]
    cluster.kubectl(
        "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    return slices


def pod_outcome(
    cluster: Cluster, namespace: str, name: str, timeout: float = OUTCOME_TIMEOUT
) -> tuple[str, dict[str, Any]]:
    """BOUND, WAITING or UNSCHEDULABLE, once the scheduler has decided, with the Pod as last
    read. The claims come before a PodScheduled=False condition, which a Pod keeps from an
    earlier attempt while the scheduler holds it at PreBind: claims reserved for it are either
    waiting for binding conditions or about to be bound (PreBind looks again every 5 s)."""
    deadline = time.monotonic() + timeout
    pod: dict[str, Any] = {}
    while time.monotonic() < deadline:
        pod = cluster.get_json("pod", name, "-n", namespace)
        if pod["spec"].get("nodeName"):
            return BOUND, pod
        held = prebind_state(cluster, pod)
        if held == WAITING:
            return WAITING, pod
        conditions = pod.get("status", {}).get("conditions") or []
        if held is None and any(
            c.get("type") == "PodScheduled" and c.get("reason") in NOT_PLACED for c in conditions
        ):
            return UNSCHEDULABLE, pod
        time.sleep(0.3)
    raise AssertionError(f"pod {namespace}/{name} not decided in {timeout}s: {pod.get('status')}")


def pod_claim_names(pod: dict[str, Any]) -> list[str]:
    """The names of the Pod's claims: named ones, and those made from its templates."""
    named = [
        c["resourceClaimName"]
        for c in pod["spec"].get("resourceClaims") or []
        if c.get("resourceClaimName")
    ]
    statuses = pod.get("status", {}).get("resourceClaimStatuses") or []
    return named + [s["resourceClaimName"] for s in statuses if s.get("resourceClaimName")]


def prebind_state(cluster: Cluster, pod: dict[str, Any]) -> str | None:
    """WAITING when a claim reserved for the Pod has a device whose binding conditions the
    driver has not all reported True; RESERVED when it has claims and all are reserved for it
    (the scheduler is binding it); None otherwise."""
    namespace, uid = pod["metadata"]["namespace"], pod["metadata"]["uid"]
    names = pod_claim_names(pod)
    reserved = 0
    for name in names:
        claim = cluster.get_json("resourceclaim", name, "-n", namespace)
        status = claim.get("status") or {}
        if any(r.get("uid") == uid for r in status.get("reservedFor") or []):
            if pending_conditions(claim):
                return WAITING
            reserved += 1
    return RESERVED if names and reserved == len(names) else None


def pending_conditions(claim: dict[str, Any]) -> list[str]:
    """`pool/device: condition` for each binding condition of an allocated device not True in
    the claim's `status.devices`."""
    status = claim.get("status") or {}
    results = (status.get("allocation") or {}).get("devices", {}).get("results") or []
    reported = {
        (d["pool"], d["device"]): {c["type"]: c["status"] for c in d.get("conditions") or []}
        for d in status.get("devices") or []
    }
    return [
        f"{r['pool']}/{r['device']}: {condition}"
        for r in results
        for condition in r.get("bindingConditions") or []
        if reported.get((r["pool"], r["device"]), {}).get(condition) != "True"
    ]


def allocated_devices(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> list[str]:
    """`pool/device` of every device allocated to the Pod's claims."""
    statuses = pod.get("status", {}).get("resourceClaimStatuses") or []
    found: list[str] = []
    for status in statuses:
        claim = cluster.get_json("resourceclaim", status["resourceClaimName"], "-n", namespace)
        results = (
            claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results") or []
        )
        found += [f"{r['pool']}/{r['device']}" for r in results]
    return found


def force_delete(cluster: Cluster, namespace: str, *objects: str) -> None:
    """Pods bound to a node without kubelet only go away with a forced delete."""
    cluster.kubectl(
        "delete",
        "-n",
        namespace,
        *objects,
        "--grace-period=0",
        "--force",
        "--ignore-not-found",
        "--wait=true",
        check=False,
    )
