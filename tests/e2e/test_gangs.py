"""Gangs on the real control plane: the Job controller creates the Pods, the resourceclaim
controller their claims, kube-scheduler binds PodGroups whole, and dragate charges each gang
whole at its creation.

Two Jobs of 4 Pods x 2 GPUs for a tenant of 8 GPUs: the first is admitted whole and its four
Pods draw from its reservation; the second is refused at its creation with the numbers, never
split 2 + 2; a lone 1-GPU Pod is refused while the gang holds the quota. Deleting the first
Job frees its devices and the second then fits; a suspended Job is charged only when it is
unsuspended.

A PodGroup (scheduling.k8s.io/v1beta1, Kubernetes 1.37) with gang minCount 4 and a claim its
Pods share is charged 4 x 1 + 2 at its creation, the shared claim once; a second one that
does not fit is refused. The alpha WorkloadWithJob gate is off, so the test makes the
Workload and the PodGroup as the Job controller would, and the Job's pod template names the
PodGroup; kube-scheduler binds the Pods on fake Nodes with NVIDIA-shaped ResourceSlices.

A PodGroup's minCount is mutable (workload scaling): scaled past its tenant's quota it is
refused by the API server's call to dragate, scaled within it its holder moves by the
difference.

No JobSet or LeaderWorkerSet controller runs here (their Go modules are not built with the
control plane): the JobSet test applies a stand-in JobSet CRD and creates the child Jobs as
the JobSet controller would (its label, its owner reference), and the Job controller makes
their Pods; the LeaderWorkerSet test applies a stand-in CRD of its v1 shape and creates each
group's leader and worker Pods with the labels the LWS controller sets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nvidia_shapes import NODES, cluster_slices, device_classes

from webhook.ledger.tenantusage import records_of

from .cluster import Cluster, running_cluster
from .dragate_server import serving
from .processes import wait_for
from .scheduling import fake_node

pytestmark = pytest.mark.e2e

NS, GROUPS, SETS, SCALE, LWS = "gangs", "groups", "sets", "scale", "lws"
CLASS = "gpu.nvidia.com"
POLICIES = "---".join(
    f"""
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: {tenant}}}
spec:
  namespaces: [{namespace}]
  quota:
  - {{deviceClassName: {CLASS}, maxDevices: {limit}}}
"""
    for tenant, namespace, limit in (
        ("ml", NS, 8),
        ("grp", GROUPS, 6),
        ("sets", SETS, 4),
        ("scale", SCALE, 8),
        ("lws", LWS, 6),
    )
)
JOBSET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobsets.jobset.x-k8s.io"},
    "spec": {
        "group": "jobset.x-k8s.io",
        "scope": "Namespaced",
        "names": {"plural": "jobsets", "singular": "jobset", "kind": "JobSet",
                  "listKind": "JobSetList"},
        "versions": [{"name": "v1alpha2", "served": True, "storage": True, "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        }}],
    },
}  # fmt: skip
"""A stand-in for the JobSet CRD: the objects' shape is sigs.k8s.io/jobset's v1alpha2."""
OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
LWS_SPEC = {
    "type": "object",
    "properties": {
        "replicas": {"type": "integer", "format": "int32", "default": 1},
        "leaderWorkerTemplate": {
            "type": "object",
            "required": ["workerTemplate"],
            "properties": {
                "size": {"type": "integer", "format": "int32", "default": 1},
                "leaderTemplate": OPEN,
                "workerTemplate": OPEN,
                "restartPolicy": {"type": "string"},
            },
        },
        "rolloutStrategy": OPEN,
        "startupPolicy": {"type": "string"},
    },
    "required": ["leaderWorkerTemplate"],
}
LWS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
    "spec": {
        "group": "leaderworkerset.x-k8s.io",
        "scope": "Namespaced",
        "names": {"plural": "leaderworkersets", "singular": "leaderworkerset",
                  "kind": "LeaderWorkerSet", "listKind": "LeaderWorkerSetList",
                  "shortNames": ["lws"]},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "subresources": {"status": {}, "scale": {
                          "specReplicasPath": ".spec.replicas",
                          "statusReplicasPath": ".status.replicas",
                          "labelSelectorPath": ".status.hpaPodSelector"}},
                      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                          "spec": LWS_SPEC, "status": OPEN}}}}],
    },
}  # fmt: skip
"""A stand-in for the LeaderWorkerSet CRD: sigs.k8s.io/lws's v1 shape (`spec.replicas`,
`spec.leaderWorkerTemplate.size`, its leader and worker pod templates, the scale
subresource), the pod templates left open."""


def kubectl_json(cluster: Cluster, verb: str, obj: Any, *args: str, check: bool = True) -> Any:
    return cluster.kubectl(verb, "-f", "-", *args, input=json.dumps(obj), check=check)


def container(gpus: int) -> dict[str, Any]:
    return {"name": "train", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}


NOWHERE = {"dragate.test/scheduled": "never"}
"""A nodeSelector no node matches: Pods of the tests that judge admission alone stay Pending,
so once the PodGroup test publishes nodes its Pods have the devices to themselves."""


def job(name: str, *, suspend: bool = False) -> dict[str, Any]:
    template = {
        "spec": {"restartPolicy": "Never", "nodeSelector": NOWHERE, "containers": [container(2)]}
    }
    spec = {"parallelism": 4, "completions": 4, "suspend": suspend, "template": template}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}  # fmt: skip


def lone_pod() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lone", "namespace": NS},
            "spec": {"containers": [container(1)]}}  # fmt: skip


@pytest.fixture(scope="module")
def gangs(e2e_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A control plane (the Job and resourceclaim controllers run in kube-controller-manager,
    and kube-scheduler), NVIDIA's DeviceClasses, and `dragate serve` registered for Pods,
    claims, Jobs, JobSets, LeaderWorkerSets and PodGroups. Nodes come later: the Jobs' Pods
    stay Pending."""
    with running_cluster(e2e_bin_dir, scheduler=True) as cluster:
        for device_class in device_classes():
            kubectl_json(cluster, "create", device_class)
        for namespace in (NS, GROUPS, SETS, SCALE, LWS):
            kubectl_json(cluster, "create", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": namespace}})  # fmt: skip
        for crd in (JOBSET_CRD, LWS_CRD):
            kubectl_json(cluster, "create", crd)
            cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                            f"crd/{crd['metadata']['name']}")  # fmt: skip
        policies = tmp_path_factory.mktemp("gang-policies")
        (policies / "policies.yaml").write_text(POLICIES)
        too_big = {**job("probe"), "spec": {**job("probe")["spec"], "parallelism": 5}}
        with serving(cluster, policies, "dragate-gangs", too_big, "needs 10"):
            yield cluster


def held(cluster: Cluster, tenant: str = "ml") -> dict[str, int]:
    """The tenant's holders in dragate's ledger: key -> GPUs (grants and wants left out)."""
    found = cluster.kubectl("get", "tenantusage", tenant, "-o", "json", "--ignore-not-found")
    if not found.stdout.strip():
        return {}
    records = records_of(json.loads(found.stdout))
    return {
        k: sum(r.devices.values())
        for k, r in records.items()
        if k.startswith(("pod:", "claim:", "gang:")) and sum(r.devices.values())
    }


def claims(cluster: Cluster, namespace: str = NS) -> list[dict[str, Any]]:
    return list(cluster.get_json("resourceclaims", "-n", namespace)["items"])


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


def claim_template(name: str, count: int) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": CLASS, "count": count}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": GROUPS},
            "spec": {"spec": {"devices": {"requests": [request]}}}}  # fmt: skip


SHARED = {"name": "shared", "resourceClaimTemplateName": "shared-gpu"}


def workload() -> dict[str, Any]:
    """The Workload the Job controller makes for Job `train` (WorkloadWithJob)."""
    template = {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "train-wl", "namespace": GROUPS},
            "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
                     "podGroupTemplates": [template]}}  # fmt: skip


def group_job() -> dict[str, Any]:
    """4 Pods, each with its own 1-GPU claim and the PodGroup's shared 2-GPU claim."""
    main = {"name": "train", "image": "x",
            "resources": {"claims": [{"name": "gpu"}, {"name": "shared"}]}}  # fmt: skip
    pod_spec = {
        "restartPolicy": "Never",
        "schedulingGroup": {"podGroupName": "train-pg"},
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}, SHARED],
        "containers": [main],
    }
    spec = {"parallelism": 4, "completions": 4, "suspend": True,
            "template": {"spec": pod_spec}}  # fmt: skip
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": GROUPS}, "spec": spec}  # fmt: skip


def podgroup(name: str, owner: dict[str, Any] | None) -> dict[str, Any]:
    """A PodGroup as the Job controller makes it: owned by its Job, from its Workload."""
    meta: dict[str, Any] = {"name": name, "namespace": GROUPS}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    spec = {
        "workloadRef": {"workloadName": "train-wl", "templateName": "workers"},
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "resourceClaims": [SHARED],
    }
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": meta, "spec": spec}  # fmt: skip


def publish_nodes(cluster: Cluster) -> None:
    """Ready Nodes and their ResourceSlices (the DeviceClasses are there from the start)."""
    for name in NODES:
        fake_node(cluster, name)
    slices = [{**s, "metadata": {"name": s["metadata"]["name"]}} for s in cluster_slices()]
    kubectl_json(cluster, "create", {"apiVersion": "v1", "kind": "List", "items": slices})


def group_pods(cluster: Cluster) -> list[dict[str, Any]]:
    return list(cluster.get_json("pods", "-n", GROUPS)["items"])


def test_a_podgroup_is_charged_once_with_its_shared_claim_and_bound_whole(
    gangs: Cluster,
) -> None:
    cluster = gangs
    for name, count in (("one-gpu", 1), ("shared-gpu", 2)):
        kubectl_json(cluster, "create", claim_template(name, count))
    kubectl_json(cluster, "create", workload())
    kubectl_json(cluster, "create", group_job())
    job_ = cluster.get_json("job", "train", "-n", GROUPS)
    assert held(cluster, "grp") == {}  # the Job's PodGroup carries its gang
    assert kubectl_json(cluster, "create", podgroup("train-pg", job_)).returncode == 0
    reserved = held(cluster, "grp")  # the group's claim, made at once, may draw from it already
    assert sum(reserved.values()) == 6 and "gang:groups/PodGroup/train-pg" in reserved, reserved
    refused = kubectl_json(cluster, "create", podgroup("other-pg", None), check=False)
    assert refused.returncode != 0
    assert "gang groups/other-pg needs 6 gpu.nvidia.com; tenant grp has 0 free" in (
        refused.stderr
    ), refused.stderr
    publish_nodes(cluster)
    resume = json.dumps({"spec": {"suspend": False}})
    cluster.kubectl("patch", "job", "train", "-n", GROUPS, "--type=merge", "-p", resume)
    wait_for(lambda: len(group_pods(cluster)) == 4, timeout=60, interval=0.5,
             what="the Job's 4 Pods")  # fmt: skip
    # A gang's Pods may be tried, and marked Unschedulable, before all of them exist: the
    # scheduler's verdict is the gang bound whole, so wait for that rather than a first try.
    try:
        wait_for(lambda: all(p["spec"].get("nodeName") for p in group_pods(cluster)),
                 timeout=120, interval=1, what="the gang's 4 Pods bound")  # fmt: skip
    except TimeoutError as error:
        raise AssertionError([p.get("status") for p in group_pods(cluster)]) from error
    found = claims(cluster, GROUPS)
    owned = [c for c in found if any(o["kind"] == "PodGroup" for o in
                                     c["metadata"].get("ownerReferences") or [])]  # fmt: skip
    assert (len(found), len(owned)) == (5, 1), [c["metadata"]["name"] for c in found]
    wait_for(lambda: sum(held(cluster, "grp").values()) == 6 and
             "gang:groups/PodGroup/train-pg" not in held(cluster, "grp"),
             timeout=30, interval=0.5, what="the Pods and the shared claim drawing it")  # fmt: skip


def jobset(name: str) -> dict[str, Any]:
    """2 Jobs x 2 Pods x 1 GPU: 4 GPUs at once."""
    labels = {"jobset.sigs.k8s.io/jobset-name": name}
    pod_template = {
        "metadata": {"labels": labels},
        "spec": {"restartPolicy": "Never", "nodeSelector": NOWHERE, "containers": [container(1)]},
    }
    job_spec = {"parallelism": 2, "completions": 2, "template": pod_template}
    spec = {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": job_spec}}]}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": SETS}, "spec": spec}  # fmt: skip


def child_job(owner: dict[str, Any], index: int) -> dict[str, Any]:
    """A Job as the JobSet controller makes it: its label, its owner reference."""
    name = owner["metadata"]["name"]
    ref = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": name,
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    meta = {
        "name": f"{name}-w-{index}",
        "namespace": SETS,
        "labels": {"jobset.sigs.k8s.io/jobset-name": name},
        "ownerReferences": [ref],
    }
    spec = owner["spec"]["replicatedJobs"][0]["template"]["spec"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}  # fmt: skip


def test_a_jobset_is_charged_whole_once_and_its_pods_draw_from_it(gangs: Cluster) -> None:
    cluster = gangs
    assert kubectl_json(cluster, "create", jobset("js")).returncode == 0
    assert held(cluster, "sets") == {"gang:sets/JobSet/js": 4}
    refused = kubectl_json(cluster, "create", jobset("js-2"), check=False)
    assert refused.returncode != 0
    assert "gang sets/js-2 needs 4 gpu.nvidia.com; tenant sets has 0 free" in refused.stderr
    owner = cluster.get_json("jobset", "js", "-n", SETS)
    for index in range(2):
        assert kubectl_json(cluster, "create", child_job(owner, index)).returncode == 0
    wait_for(lambda: len(claims(cluster, SETS)) == 4, timeout=60, interval=0.5,
             what="the JobSet's 4 Pods and their claims")  # fmt: skip
    wait_for(lambda: sum(held(cluster, "sets").values()) == 4 and
             "gang:sets/JobSet/js" not in held(cluster, "sets"),
             timeout=30, interval=0.5, what="the Pods drawing the JobSet's gang")  # fmt: skip


def scaling_job() -> dict[str, Any]:
    """A suspended Job whose 1-GPU Pods name the PodGroup `elastic-pg`."""
    pod_spec = {
        "restartPolicy": "Never",
        "schedulingGroup": {"podGroupName": "elastic-pg"},
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "containers": [{"name": "train", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
    }
    spec = {"parallelism": 2, "completions": 2, "suspend": True, "template": {"spec": pod_spec}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "elastic", "namespace": SCALE}, "spec": spec}  # fmt: skip


def scale_podgroup(cluster: Cluster, min_count: int) -> Any:
    patch = json.dumps({"spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})
    return cluster.kubectl("patch", "podgroup", "elastic-pg", "-n", SCALE, "--type=merge",
                           "-p", patch, check=False)  # fmt: skip


def test_a_podgroup_scaled_past_the_quota_is_refused_and_within_it_charged(
    gangs: Cluster,
) -> None:
    cluster = gangs
    template = {**claim_template("one-gpu", 1)}
    template["metadata"] = {"name": "one-gpu", "namespace": SCALE}
    kubectl_json(cluster, "create", template)
    kubectl_json(cluster, "create", scaling_job())
    owner = cluster.get_json("job", "elastic", "-n", SCALE)
    group = podgroup("elastic-pg", owner)
    group["metadata"]["namespace"] = SCALE
    group["spec"] = {"schedulingPolicy": {"gang": {"minCount": 2}}}
    assert kubectl_json(cluster, "create", group).returncode == 0
    assert held(cluster, "scale") == {"gang:scale/PodGroup/elastic-pg": 2}
    refused = scale_podgroup(cluster, 10)
    assert refused.returncode != 0
    assert "gang scale/elastic-pg needs 10 gpu.nvidia.com; tenant scale has 8 free" in (
        refused.stderr
    ), refused.stderr
    assert held(cluster, "scale") == {"gang:scale/PodGroup/elastic-pg": 2}
    assert scale_podgroup(cluster, 6).returncode == 0
    assert held(cluster, "scale") == {"gang:scale/PodGroup/elastic-pg": 6}
    assert scale_podgroup(cluster, 3).returncode == 0
    assert held(cluster, "scale") == {"gang:scale/PodGroup/elastic-pg": 3}
    found = cluster.get_json("podgroup", "elastic-pg", "-n", SCALE)
    assert found["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3


LWS_NAME = "leaderworkerset.sigs.k8s.io/name"


def leaderworkerset(name: str) -> dict[str, Any]:
    """2 groups of size 2: a 1-GPU leader and a 2-GPU worker each, 6 GPUs at once."""

    def template(gpus: int) -> dict[str, Any]:
        # Matched by no Node: the Pods stay Pending, so deleting them needs no kubelet.
        selector = {"dragate.io/e2e-pool": "none"}
        return {"spec": {"nodeSelector": selector, "containers": [container(gpus)]}}

    spec = {"replicas": 2, "leaderWorkerTemplate": {
        "size": 2, "leaderTemplate": template(1), "workerTemplate": template(2)}}  # fmt: skip
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": LWS}, "spec": spec}  # fmt: skip


def lws_pod(owner: dict[str, Any], group: int, worker: int) -> dict[str, Any]:
    """A Pod as the LWS controller makes it, by the leader's (worker 0) or the group's
    StatefulSet: `<lws>-<group>[-<worker>]`, its labels. No StatefulSet controller runs here,
    so the Pod is owned by the LeaderWorkerSet itself, for deletion to cascade as it would."""
    name = owner["metadata"]["name"]
    role = "leaderTemplate" if worker == 0 else "workerTemplate"
    labels = {LWS_NAME: name, "leaderworkerset.sigs.k8s.io/group-index": str(group),
              "leaderworkerset.sigs.k8s.io/worker-index": str(worker)}  # fmt: skip
    ref = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "name": name, "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}  # fmt: skip
    meta = {"name": f"{name}-{group}" + (f"-{worker}" if worker else ""), "namespace": LWS,
            "labels": labels, "ownerReferences": [ref],
            "annotations": {"leaderworkerset.sigs.k8s.io/size": "2"}}  # fmt: skip
    spec = owner["spec"]["leaderWorkerTemplate"][role]["spec"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def test_a_leaderworkerset_is_charged_whole_once_and_its_pods_draw_from_it(
    gangs: Cluster,
) -> None:
    cluster = gangs
    assert kubectl_json(cluster, "create", leaderworkerset("serve")).returncode == 0
    assert held(cluster, "lws") == {"gang:lws/LeaderWorkerSet/serve": 6}
    refused = kubectl_json(cluster, "create", leaderworkerset("serve-2"), check=False)
    assert refused.returncode != 0
    assert "gang lws/serve-2 needs 6 gpu.nvidia.com; tenant lws has 0 free" in refused.stderr
    owner = cluster.get_json("leaderworkerset", "serve", "-n", LWS)
    for group in range(2):
        for worker in range(2):
            made = kubectl_json(cluster, "create", lws_pod(owner, group, worker))
            assert made.returncode == 0
    wait_for(lambda: len(claims(cluster, LWS)) == 4, timeout=60, interval=0.5,
             what="the LeaderWorkerSet's 4 Pods' claims")  # fmt: skip
    assert sum(held(cluster, "lws").values()) == 6
    wait_for(lambda: "gang:lws/LeaderWorkerSet/serve" not in held(cluster, "lws"),
             timeout=30, interval=0.5, what="the Pods drawing the LWS's gang")  # fmt: skip
    assert sum(held(cluster, "lws").values()) == 6
    cluster.kubectl("delete", "leaderworkerset", "serve", "-n", LWS, "--cascade=foreground",
                    "--wait=true")  # fmt: skip
    wait_for(lambda: not claims(cluster, LWS) and not held(cluster, "lws"), timeout=90,
             interval=0.5, what="the LeaderWorkerSet's devices freed")  # fmt: skip
    assert kubectl_json(cluster, "create", leaderworkerset("serve-2")).returncode == 0
    assert held(cluster, "lws") == {"gang:lws/LeaderWorkerSet/serve-2": 6}
