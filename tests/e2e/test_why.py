"""`kubectl dragate why` on the real control plane, run as the user runs it (the
`kubectl-dragate` console script with `--kubeconfig`), with kube-scheduler as the oracle.

A Pod whose claim asks for a product no slice has stays Unschedulable: `why` names the
request and the selector that rules the devices out, and quotes the scheduler's own
FailedScheduling event as the scheduler wrote it. A Pod that fits is "scheduled on" the node
the scheduler chose, and its claim is allocated and reserved for it. A Pod whose claim got
bind-0's GPU, which has binding conditions, is held by the scheduler at PreBind: `why` names
the condition the driver has not reported, until the test, playing the driver, reports it.
A Pod admitted with a Warn validation's warning shows it as the background audit reports it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nvidia_shapes import (
    A100,
    A100_40,
    gpu_devices,
    partitioned_slices,
    resource_slice,
    tainted,
)

from .cluster import Cluster, running_cluster
from .dragate_server import REPO, serving
from .processes import wait_for
from .scheduling import (
    BOUND,
    UNSCHEDULABLE,
    WAITING,
    fake_node,
    force_delete,
    pending_conditions,
    pod_outcome,
    publish_inventory,
)
from .toolchain_bins import require_binaries

pytestmark = pytest.mark.e2e

NS = "why"
MORE_NS = "why-more"
"""The namespace of the warned and binding cases: a quota of their own, whatever ran before."""
CLASS = "gpu.nvidia.com"
MISSING = f"device.attributes['{CLASS}'].productName == 'NVIDIA Z999'"
POLICIES = f"""
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: why}}
spec:
  namespaces: [{NS}]
  quota:
  - {{deviceClassName: {CLASS}, maxDevices: 8}}
---
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: why-more}}
spec:
  namespaces: [{MORE_NS}]
  quota:
  - {{deviceClassName: {CLASS}, maxDevices: 8}}
"""
LIVE_NS = "why-live"
LIVE_TENANT = {
    "apiVersion": "dragate.io/v1alpha1",
    "kind": "Tenant",
    "metadata": {"name": "live"},
    "spec": {"namespaces": [LIVE_NS], "quota": [{"deviceClassName": CLASS, "maxDevices": 2}]},
}
CRDS = REPO / "webhook" / "defaults" / "crds"
POLICY_CRDS = ("tenants", "deviceclasspolicies", "policyreports", "clusterpolicyreports")
"""Tenants and DeviceClassPolicies as objects, the audit's reports."""
ATTACHED, FAILED = "dra.example.com/attached", "dra.example.com/failed"
ECC = {"key": "gpu.nvidia.com/ecc", "value": "bad", "effect": "NoSchedule"}
UUID = "device.attributes['gpu.nvidia.com'].uuid == '{}'"
PARENT = "device.attributes['gpu.nvidia.com'].parentUUID == '{}'"
A100_80 = f"device.attributes['{CLASS}'].productName == 'NVIDIA A100-SXM4-80GB'"
PLUGIN = str(Path(sys.executable).with_name("kubectl-dragate"))
if not Path(PLUGIN).exists():  # pragma: no cover - a venv without the script next to python
    PLUGIN = shutil.which("kubectl-dragate") or "kubectl-dragate"


def gpu_claim(
    name: str, count: int = 1, *selectors: str, device_class: str = CLASS, namespace: str = NS
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": "ExactCount",
                               "count": count}  # fmt: skip
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def claim_pod(name: str, claim: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "cuda", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [container],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}], **spec},
    }  # fmt: skip


def extra_inventory(cluster: Cluster) -> None:
    """A partitionable A100 (its MIG placements share its counters), a node whose GPUs
    carry a NoSchedule taint, and one whose A100-40GB is bound only once the driver reports
    ATTACHED (KEP-5007), beside the NVIDIA-shaped nodes."""
    for node in ("part-0", "taint-0", "bind-0"):
        fake_node(cluster, node)
    waiting = [{**d, "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}
               for d in gpu_devices("bind-0", A100_40, 1)]  # fmt: skip
    slices = [*partitioned_slices("part-0", 1),
              resource_slice("taint-0", tainted(gpu_devices("taint-0", A100, 2), ECC)),
              resource_slice("bind-0", waiting)]  # fmt: skip
    create(cluster, *({**s, "metadata": {"name": s["metadata"]["name"]}} for s in slices))


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
        extra_inventory(cluster)
        for crd in POLICY_CRDS:
            cluster.kubectl("apply", "-f", str(CRDS / f"{crd}.yaml"))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                        "crd/tenants.dragate.io", "crd/deviceclasspolicies.dragate.io",
                        "crd/policyreports.wgpolicyk8s.io")  # fmt: skip
        namespaces = ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                      for n in (NS, LIVE_NS, MORE_NS))  # fmt: skip
        create(cluster, *namespaces)
        policies = tmp_path_factory.mktemp("why-policies")
        (policies / "policies.yaml").write_text(POLICIES)
        with serving(cluster, policies, "dragate-why", gpu_claim("probe", 9), "limit 8"):
            yield Site(cluster, policies)


def why(site: Site, *args: str) -> list[dict[str, Any]]:
    """`kubectl-dragate why ARGS -n NS --kubeconfig ... -o json`, as a user types it."""
    return plugin(site, "why", *args, "-n", NS, "--policies", str(site.policies))


def plugin(site: Site, *args: str) -> list[dict[str, Any]]:
    command = [PLUGIN, *args, "--kubeconfig", str(site.cluster.kubeconfig), "-o", "json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def failed_scheduling(cluster: Cluster, pod: str) -> list[str]:
    events = cluster.get_json("events", "-n", NS, "--field-selector",
                              f"involvedObject.name={pod},reason=FailedScheduling")  # fmt: skip
    return [str(e["message"]) for e in events.get("items") or []]


def bound(cluster: Cluster, pod: str, claim: dict[str, Any]) -> None:
    """`claim` allocated to the Pod `pod`, which the scheduler bound."""
    create(cluster, claim, claim_pod(pod, claim["metadata"]["name"]))
    outcome, found = pod_outcome(cluster, NS, pod)
    assert outcome == BOUND, found.get("status")


DRA_WORDS = "cannot allocate all claims"
NODE_WORDS = "didn't match Pod's node affinity/selector"
HELD_CASES = {
    # cause: (holder Pod and its claim or None, the Pending Pod's claim, its spec, cited
    # source, words of `why`'s message, words of the scheduler's FailedScheduling)
    "taints": (None, gpu_claim("tainted", 1, UUID.format("GPU-taint-0-0")), {},
               f"ResourceClaim {NS}/tainted", "have taints the request does not tolerate "
               "(gpu.nvidia.com/ecc=bad:NoSchedule)", DRA_WORDS),
    "allocated": (("holder", gpu_claim("held", 1, UUID.format("GPU-h100-0-0"))),
                  gpu_claim("wanted", 1, UUID.format("GPU-h100-0-0")), {},
                  f"ResourceClaim {NS}/held", f"needs 1, 1 match, 1 allocated: "
                  f"h100-0/gpu-0 to ResourceClaim {NS}/held (Pod {NS}/holder)", DRA_WORDS),
    "counters": (("mig-holder", gpu_claim("mig-held", 1, PARENT.format("GPU-part-0-0"),
                                          device_class="mig.nvidia.com")),
                 gpu_claim("whole", 1, UUID.format("GPU-part-0-0")), {},
                 f"ResourceClaim {NS}/mig-held", f"need counters of {CLASS}/part-0/"
                 f"gpu-0-counters, used up by part-0/gpu-0-mig-", DRA_WORDS),
    "node": (None, gpu_claim("pinned", 1, A100_80),
             {"nodeSelector": {"kubernetes.io/hostname": "h100-0"}}, f"Pod {NS}/pending-node",
             "every node with a matching device is excluded (a100-0, a100-1, part-0): "
             "nodeSelector "
             "kubernetes.io/hostname=h100-0", NODE_WORDS),
}  # fmt: skip


@pytest.mark.parametrize("cause", HELD_CASES, ids=list(HELD_CASES))
def test_a_pending_pod_whose_matching_devices_are_held_names_what_holds_them(
    site: Site, cause: str
) -> None:
    holder, claim, spec, source, words, scheduler_words = HELD_CASES[cause]
    said_cause = "feasibility" if cause == "taints" else cause  # a taint rules devices out
    cluster, name = site.cluster, f"pending-{cause}"
    if holder is not None:
        bound(cluster, *holder)
    create(cluster, claim, claim_pod(name, claim["metadata"]["name"], **spec))
    outcome, pod = pod_outcome(cluster, NS, name)
    assert outcome == UNSCHEDULABLE, pod.get("status")
    wait_for(lambda: bool(failed_scheduling(cluster, name)), timeout=30, interval=0.5,
             what="the scheduler's FailedScheduling event")  # fmt: skip
    found = why(site, name)
    first = found[0]
    assert (first["cause"], first["source"], first["blocking"]) == (said_cause, source, True), found
    assert words in first["message"], found
    said = failed_scheduling(cluster, name)
    assert any(scheduler_words in s for s in said), said
    quoted = [f["message"].removeprefix("FailedScheduling: ") for f in found
              if f["cause"] == "scheduler"]  # fmt: skip
    assert any(q in said for q in quoted), (quoted, said)


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
    create(site.cluster, gpu_claim("nowhere", 1, MISSING))
    found = why(site, "--claim", "nowhere")
    assert found[0]["cause"] == "feasibility" and found[0]["blocking"], found
    assert f'selector "{MISSING}"' in found[0]["message"]
    assert [f["cause"] for f in found][-1] == "quota", found


def enforced_everywhere(cluster: Cluster, namespace: str = LIVE_NS, in_a_row: int = 6) -> bool:
    """A dry run over a live Tenant's limit (2) is denied by `in_a_row` answers in a row: each
    gunicorn worker watches Tenant objects on its own."""
    probe = json.dumps(gpu_claim("probe", 5, namespace=namespace))
    for _ in range(in_a_row):
        answer = cluster.kubectl("create", "-f", "-", "--dry-run=server", input=probe,
                                 check=False)  # fmt: skip
        if "limit 2" not in answer.stderr:
            return False
    return True


def tenant_usage_status(cluster: Cluster) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = (cluster.get_json("tenant", "live").get("status") or {}).get(
        "usage"
    ) or []
    return rows


def test_usage_of_a_live_tenant_equals_its_status(site: Site) -> None:
    cluster = site.cluster
    cluster.kubectl("apply", "-f", "-", input=json.dumps(LIVE_TENANT))
    wait_for(lambda: enforced_everywhere(cluster), timeout=60, interval=1,
             what="the live Tenant enforced by every worker")  # fmt: skip
    create(cluster, gpu_claim("live-one", 1, namespace=LIVE_NS))
    used = [{"deviceClassName": CLASS, "used": 1, "limit": 2}]
    wait_for(lambda: tenant_usage_status(cluster) == used, timeout=60, interval=1,
             what="usage 1/2 in the live Tenant's status")  # fmt: skip
    wait_for(lambda: plugin(site, "usage", "live")[0]["pending"] == 0, timeout=90, interval=1,
             what="the reconciler confirming claim live-one")  # fmt: skip
    rows = plugin(site, "usage", "live")
    status = tenant_usage_status(cluster)
    assert [(r["deviceClassName"], r["limit"], r["used"]) for r in rows] == [
        (s["deviceClassName"], s.get("limit"), s["used"]) for s in status]  # fmt: skip
    assert rows[0]["free"] == 1 and rows[0]["tenant"] == "live", rows
    holders = [h["holder"] for h in rows[0]["holders"]]
    assert holders == [f"claim:{LIVE_NS}/live-one"], rows
    assert rows[0]["pending"] == 0, rows  # confirmed: a confirmation is never taken back
    by_namespace = plugin(site, "usage", "-n", LIVE_NS)  # the namespace's tenant
    assert by_namespace == rows


FULL_NS = "why-full"
FULL_TENANT = {**LIVE_TENANT, "metadata": {"name": "full"}, "spec": {**LIVE_TENANT["spec"],
               "namespaces": [FULL_NS]}}  # fmt: skip


def gpu_template(name: str, count: int) -> dict[str, Any]:
    claim = gpu_claim(name, count, namespace=FULL_NS)
    return {**claim, "kind": "ResourceClaimTemplate", "spec": {"spec": claim["spec"]}}


def template_pod(name: str, template: str) -> dict[str, Any]:
    found = claim_pod(name, "")
    found["metadata"]["namespace"] = FULL_NS
    found["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return found


@pytest.fixture(scope="module")
def full(site: Site) -> Cluster:
    """Live Tenant `full` (2 GPUs in why-full), both held by Pod why-full/full-holder, whose
    claim the reconciler has confirmed (nothing pending)."""
    cluster = site.cluster
    create(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FULL_NS}})
    cluster.kubectl("apply", "-f", "-", input=json.dumps(FULL_TENANT))
    wait_for(lambda: enforced_everywhere(cluster, FULL_NS), timeout=60, interval=1,
             what="Tenant full enforced by every worker")  # fmt: skip
    create(cluster, gpu_template("two", 2), template_pod("full-holder", "two"))
    wait_for(lambda: plugin(site, "usage", "full")[0]["pending"] == 0 and
             plugin(site, "usage", "full")[0]["used"] == 2, timeout=90, interval=1,
             what="full-holder's 2 GPUs confirmed")  # fmt: skip
    return cluster


def events_of(cluster: Cluster, kind: str, name: str, reason: str) -> list[str]:
    selector = f"involvedObject.kind={kind},involvedObject.name={name},reason={reason}"
    events = cluster.get_json("events", "-n", FULL_NS, "--field-selector", selector)
    return [str(e["message"]) for e in events.get("items") or []]


def test_a_pod_whose_claim_the_live_quota_refuses_names_the_limit_and_its_holders(
    site: Site, full: Cluster
) -> None:
    """Admitted before its template existed, the Pod is charged nothing; the claim made from
    the template later is denied over the live Tenant's quota, and the Pod stays Pending."""
    create(full, template_pod("full-waiting", "later"))
    create(full, gpu_template("later", 1))
    refused = lambda: events_of(full, "Pod", "full-waiting", "FailedResourceClaimCreation")  # noqa: E731
    wait_for(lambda: any("limit 2" in m for m in refused()), timeout=60, interval=0.5,
             what="the claim of full-waiting denied over quota")  # fmt: skip
    found = plugin(site, "why", "full-waiting", "-n", FULL_NS)  # the cluster's Tenant objects
    first = found[0]
    assert (first["cause"], first["source"], first["blocking"]) == ("quota", "Tenant full", True)
    assert first["message"] == (f"{CLASS}: 2/2 used (0 pending), this Pod needs 1, holds 0; "
                                f"held by {FULL_NS}/full-holder=2"), found  # fmt: skip
    quoted = [f["message"].partition(": ")[2] for f in found if f["cause"] == "scheduler"]
    said = refused()
    assert any(q in said for q in quoted), (quoted, said)
    assert any("[Tenant/full]" in q and "limit 2" in q for q in quoted), quoted
    pod = full.get_json("pod", "full-waiting", "-n", FULL_NS)
    assert not pod["spec"].get("nodeName"), pod.get("status")


def test_a_workload_whose_pods_are_denied_names_the_policy_rule_and_message(
    site: Site, full: Cluster
) -> None:
    pod = template_pod("", "two")["spec"]
    replicaset = {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "refused", "namespace": FULL_NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "refused"}},
                 "template": {"metadata": {"labels": {"app": "refused"}}, "spec": pod}},
    }  # fmt: skip
    create(full, replicaset)
    denied = lambda: events_of(full, "ReplicaSet", "refused", "FailedCreate")  # noqa: E731
    wait_for(lambda: any("denied the request" in m for m in denied()), timeout=60, interval=0.5,
             what="the ReplicaSet's Pod denied")  # fmt: skip
    found = plugin(site, "why", "replicaset/refused", "-n", FULL_NS)
    first = found[0]
    assert (first["cause"], first["source"], first["blocking"]) == (
        "denied", f"ReplicaSet {FULL_NS}/refused", True), found  # fmt: skip
    prefix = "Pods denied by Tenant/full, rule quota: "
    assert first["message"].startswith(prefix), found
    message = first["message"].removeprefix(prefix)
    assert "limit 2" in message and f"{FULL_NS}/full-holder" in message, found
    assert any(f"[Tenant/full] {message}" in m for m in denied()), (message, denied())


REVIEWED = "more than 2 GPUs in one request are reviewed by the platform team"
WATCH = {
    "apiVersion": "dragate.io/v1alpha1", "kind": "DeviceClassPolicy",
    "metadata": {"name": "why-watch"},
    "spec": {"deviceClassNames": [CLASS], "validations": [
        {"expression": "object.kind != 'Pod' || request.count <= 2", "message": REVIEWED,
         "action": "Warn"}]},
}  # fmt: skip
AUDIT_TIMEOUT = 150.0
"""The audit's next pass (every 60 s) and its report's write, with room for a slow host."""


def why_more(site: Site, *args: str) -> list[dict[str, Any]]:
    return plugin(site, "why", *args, "-n", MORE_NS, "--policies", str(site.policies))


def in_more(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "namespace": MORE_NS}}


def three_gpus(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A template of 3 GPUs no node has (the Pod stays Pending) and a Pod made from it."""
    claim = gpu_claim(name, 3, MISSING, namespace=MORE_NS)
    found = in_more(claim_pod(name, ""))
    found["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": name}]
    return {**claim, "kind": "ResourceClaimTemplate", "spec": {"spec": claim["spec"]}}, found


def reported(cluster: Cluster, pod: str) -> list[dict[str, Any]]:
    """The `warn` results about Pod `pod` in the namespace's dragate PolicyReport."""
    found = cluster.kubectl("get", "policyreport", "dragate", "-n", MORE_NS, "-o", "json",
                            check=False)  # fmt: skip
    results = json.loads(found.stdout).get("results") or [] if found.returncode == 0 else []
    return [r for r in results if r["result"] == "warn"
            and any(o["kind"] == "Pod" and o["name"] == pod for o in r["resources"])]  # fmt: skip


def test_a_pod_admitted_with_a_warning_shows_the_audits_warning_beside_its_cause(
    site: Site,
) -> None:
    """The warning the Pod was admitted with, as the leader's background audit reports it:
    never blocking; the Pod's own cause (no device matches) comes first."""
    cluster = site.cluster
    template, pod = three_gpus("watched")
    create(cluster, template)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(WATCH))
    try:

        def warns() -> bool:
            answer = cluster.kubectl("create", "-f", "-", "--dry-run=server",
                                     input=json.dumps(pod), check=False)  # fmt: skip
            return answer.returncode == 0 and REVIEWED in answer.stderr

        wait_for(lambda: all(warns() for _ in range(6)), timeout=60, interval=1,
                 what="the Warn validation served by every worker")  # fmt: skip
        admitted = cluster.kubectl("create", "-f", "-", input=json.dumps(pod))
        assert "Warning: dragate: [Warn] " in admitted.stderr and REVIEWED in admitted.stderr
        wait_for(lambda: bool(reported(cluster, "watched")), timeout=AUDIT_TIMEOUT, interval=1,
                 what="the audit's warn result about Pod watched")  # fmt: skip
        result = reported(cluster, "watched")[0]
        found = why_more(site, "watched")
        assert found[0]["cause"] == "feasibility" and found[0]["blocking"], found
        warned = [f for f in found if f["cause"] == "warned"]
        message = f"warn by {result['policy']}, rule {result['rule']}: {result['message']}"
        assert warned == [{"cause": "warned", "source": f"PolicyReport {MORE_NS}/dragate",
                           "message": message, "blocking": False}], found  # fmt: skip
        assert result["policy"] == "DeviceClassPolicy/why-watch" and REVIEWED in message, result
    finally:
        cluster.kubectl("delete", "deviceclasspolicy", "why-watch", "--ignore-not-found")
        force_delete(cluster, MORE_NS, "pod/watched")


def driver_reports(cluster: Cluster, name: str, condition: str) -> None:
    """What the driver writes: `condition` True on every device allocated to claim `name`."""
    claim = cluster.get_json("resourceclaim", name, "-n", MORE_NS)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    true = {"type": condition, "status": "True", "reason": "Reported", "message": "e2e driver",
            "lastTransitionTime": now}  # fmt: skip
    devices = [
        {"driver": r["driver"], "pool": r["pool"], "device": r["device"], "conditions": [true]}
        for r in claim["status"]["allocation"]["devices"]["results"]
    ]
    cluster.kubectl("patch", "resourceclaim", name, "-n", MORE_NS, "--subresource=status",
                    "--type=merge", "-p", json.dumps({"status": {"devices": devices}}))  # fmt: skip


def test_a_pod_held_for_binding_conditions_names_them_as_the_scheduler_waits(
    site: Site,
) -> None:
    """The scheduler allocates bind-0's GPU, reserves the claim and holds the Pod at PreBind:
    `why` names the condition the driver has not reported; once it has, the Pod binds."""
    cluster = site.cluster
    claim = gpu_claim("attach", 1, UUID.format("GPU-bind-0-0"), namespace=MORE_NS)
    create(cluster, claim, in_more(claim_pod("held", "attach")))
    try:
        outcome, pod = pod_outcome(cluster, MORE_NS, "held")
        assert outcome == WAITING, pod.get("status")
        claim = cluster.get_json("resourceclaim", "attach", "-n", MORE_NS)
        assert pending_conditions(claim) == [f"bind-0/gpu-0: {ATTACHED}"], claim.get("status")
        found = why_more(site, "held")
        first = found[0]
        assert (first["cause"], first["source"], first["blocking"]) == (
            "binding", f"ResourceClaim {MORE_NS}/attach", True), found  # fmt: skip
        assert first["message"].startswith(
            f"{CLASS}/bind-0/gpu-0: binding conditions not True yet: {ATTACHED}; "
            "kube-scheduler holds the Pod at PreBind"), found  # fmt: skip
        assert not [f for f in found if f["cause"] == "schedulable"], found
        driver_reports(cluster, "attach", ATTACHED)
        outcome, pod = pod_outcome(cluster, MORE_NS, "held")
        assert outcome == BOUND, pod.get("status")
        assert why_more(site, "held")[0]["message"] == "scheduled on bind-0"
    finally:
        if pending_conditions(cluster.get_json("resourceclaim", "attach", "-n", MORE_NS)):
            driver_reports(cluster, "attach", ATTACHED)  # PreBind lets go only once bound
            pod_outcome(cluster, MORE_NS, "held")
        force_delete(cluster, MORE_NS, "pod/held")
        cluster.kubectl("delete", "resourceclaim", "attach", "-n", MORE_NS, "--wait=true",
                        "--timeout=60s")  # fmt: skip
