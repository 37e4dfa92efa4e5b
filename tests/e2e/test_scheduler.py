"""dragate against the real kube-scheduler and ResourceQuota (Kubernetes 1.37; the quota tests
and a representative part of the legacy table on every supported minor, `kube_matrix`).

One control plane with kube-scheduler, six fake Ready Nodes and NVIDIA-shaped ResourceSlices
(`tests/nvidia_shapes.py`): A100 and H100 nodes, a node with GPUs and MIG slices, MIG nodes
(one with 56 x 1g.10gb). The scheduler is the oracle:

- quota: ResourceQuota's `status.used` for random claims equals dragate's counting;
- feasibility: dragate's verdict on random claims equals the scheduler's outcome;
- the legacy table: Pods asking `nvidia.com/*` are created through dragate's webhook and as
  `dragate migrate` output; those the device plugin would have placed get bound with their
  claims allocated, the others stay Unschedulable with dragate's warning, and the webhook and
  `dragate check` agree on every one.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from nvidia_shapes import device_classes

from webhook.engine.counting import add_charges, devices_by_class
from webhook.engine.feasibility import check_claim
from webhook.engine.inventory import Inventory
from webhook.engine.normalize import claim_spec

from .cluster import Cluster, running_cluster
from .dragate_server import CRD, DRAGATE, DragateServer, serve_command
from .scheduler_cases import (
    CLASSES,
    DENIED,
    POLICIES,
    TABLE,
    Row,
    container,
    legacy_pod,
    quota_key,
    random_claim,
)
from .scheduling import (
    BOUND,
    UNSCHEDULABLE,
    allocated_devices,
    force_delete,
    pod_outcome,
    publish_inventory,
)
from .toolchain_bins import require_binaries
from .webhooks import register_webhooks, wait_until_webhook_fires

pytestmark = pytest.mark.e2e

ADMIN_LABEL = "resource.kubernetes.io/admin-access"


@pytest.fixture(scope="module")
def sched(kube_bin_dir: Path) -> Iterator[tuple[Cluster, list[dict[str, Any]]]]:
    require_binaries(kube_bin_dir, ("kube-scheduler",))
    with running_cluster(kube_bin_dir, scheduler=True) as cluster:
        slices = publish_inventory(cluster)
        yield cluster, slices


def kubectl_json(
    cluster: Cluster, verb: str, obj: Any, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl(verb, "-f", "-", *args, input=json.dumps(obj), check=check)


def namespace(cluster: Cluster, name: str, **labels: str) -> None:
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
    kubectl_json(cluster, "create", obj)


# --- 1. ResourceQuota and dragate count alike -------------------------------------------------


@pytest.mark.kube_matrix
def test_resourcequota_and_dragate_count_random_claims_alike(
    sched: tuple[Cluster, list[dict[str, Any]]],
) -> None:
    """240 random claims (v1/v1beta2/v1beta1, All, firstAvailable, adminAccess, capacity) in 24
    namespaces, slices published: each namespace's ResourceQuota usage equals dragate's count,
    from the objects as sent and as stored."""
    cluster, _ = sched
    rng = random.Random(1234)
    expected: dict[str, dict[str, int]] = {}
    claims: list[dict[str, Any]] = []
    for n in range(24):
        ns = f"quota-{n}"
        namespace(cluster, ns, **{ADMIN_LABEL: "true"})
        hard = {quota_key(c): "100000" for c in CLASSES}
        quota = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "dra", "namespace": ns},
            "spec": {"hard": hard},
        }
        kubectl_json(cluster, "create", quota)
        batch = [random_claim(rng, f"c{i}", ns, admin=True, capacity=True) for i in range(10)]
        claims += batch
        expected[ns] = add_charges(devices_by_class(claim_spec(c, "c")) for c in batch)
    wait_quota_ready(cluster, [f"quota-{n}" for n in range(24)])
    kubectl_json(cluster, "create", {"apiVersion": "v1", "kind": "List", "items": claims})
    for ns, charges in expected.items():
        used = cluster.get_json("resourcequota", "dra", "-n", ns)["status"]["used"]
        counted = {c: int(used[quota_key(c)]) for c in CLASSES if int(used[quota_key(c)])}
        stored = cluster.get_json("resourceclaims", "-n", ns)["items"]
        again = add_charges(devices_by_class(claim_spec(c, "c")) for c in stored)
        assert counted == charges == again, ns


def wait_quota_ready(cluster: Cluster, namespaces: list[str]) -> None:
    """ResourceQuota admission refuses creates until the controller filled `status.hard`."""
    from .processes import wait_for

    def ready() -> bool:
        return all(
            cluster.get_json("resourcequota", "dra", "-n", ns).get("status", {}).get("hard")
            for ns in namespaces
        )

    wait_for(ready, timeout=60, interval=0.5, what="ResourceQuota status")


# --- 2. feasibility == the scheduler's outcome ------------------------------------------------

FEASIBILITY_CLAIMS = int(os.environ.get("DRAGATE_E2E_FEASIBILITY_CLAIMS", "60"))


def test_feasibility_verdict_equals_the_schedulers_outcome(
    sched: tuple[Cluster, list[dict[str, Any]]],
) -> None:
    """60 random claims, each with a Pod: bound iff dragate says feasible. One at a time, so
    allocations never compete (feasibility ignores them on purpose)."""
    cluster, slices = sched
    inventory = Inventory.from_slices(slices)
    classes = {c["metadata"]["name"]: c for c in device_classes()}
    namespace(cluster, "feasible")
    rng = random.Random(99)
    disagreements: list[Any] = []
    undecided: list[Any] = []
    for i in range(FEASIBILITY_CLAIMS):
        claim = random_claim(rng, f"f{i}", "feasible", admin=False)
        results = check_claim(inventory, claim_spec(claim, "c"), classes)
        verdict = BOUND if all(r.ok for r in results) else UNSCHEDULABLE
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"f{i}", "namespace": "feasible"},
            "spec": {
                "containers": [
                    {"name": "c", "image": "x", "resources": {"claims": [{"name": "d"}]}}
                ],
                "resourceClaims": [{"name": "d", "resourceClaimName": f"f{i}"}],
            },
        }
        kubectl_json(cluster, "create", {"apiVersion": "v1", "kind": "List", "items": [claim, pod]})
        outcome, scheduled = pod_outcome(cluster, "feasible", f"f{i}")
        said = [c.get("message") for c in scheduled.get("status", {}).get("conditions", [])]
        if outcome != verdict and gave_up(said):
            undecided.append((claim["spec"], said))
        elif outcome != verdict:
            disagreements.append((claim["spec"], outcome, said, [r.message for r in results]))
        force_delete(cluster, "feasible", f"pod/f{i}")
        cluster.kubectl(
            "delete", "resourceclaim", f"f{i}", "-n", "feasible", "--wait=true", "--timeout=60s"
        )
    assert not disagreements, json.dumps(disagreements)
    assert len(undecided) <= MAX_UNDECIDED, json.dumps(undecided)


MAX_UNDECIDED = 3
"""Claims whose search kube-scheduler abandons at its DynamicResources filter timeout (10 s
per node): it leaves the Pod unschedulable for now and retries later, having decided
nothing. dragate judges whether an allocation exists, so these are not disagreements; a
few of 60 on a busy 2-core host, none when a verdict is a real "does not fit"."""


def gave_up(conditions: list[Any]) -> bool:
    """Whether the scheduler's own condition says it stopped searching on some node."""
    return any("timed out trying to allocate devices" in str(m) for m in conditions)


# --- 3. the legacy table ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def dragate_on_sched(
    sched: tuple[Cluster, list[dict[str, Any]]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, Path]]:
    cluster, _ = sched
    policies = tmp_path_factory.mktemp("sched-policies")
    (policies / "policies.yaml").write_text(POLICIES)
    cluster.kubectl("apply", "-f", str(CRD))
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/tenantusages.dragate.io"
    )
    for ns in ("legacy", "migrated", "charge-dragate", "charge-quota"):
        namespace(cluster, ns)
    server = DragateServer.launch(
        serve_command(cluster.kubeconfig, policies), cluster.workdir, name="dragate-sched"
    )
    registration = None
    try:
        registration = register_webhooks(
            cluster,
            server.server.url("/validate"),
            server.server.url("/mutate"),
            server.ca_bundle_pem,
        )
        probe = legacy_pod("probe", "legacy", [container("m", gpu=1)], [], {})

        def fires() -> bool:
            result = kubectl_json(cluster, "create", probe, "--dry-run=server", check=False)
            return "Warning: dragate" in result.stderr

        wait_until_webhook_fires(fires, timeout=60)
        yield cluster, policies
    finally:
        if registration is not None:
            registration.delete(cluster)
        server.stop()


def check_verdict(policies: Path, state: Path, pod: dict[str, Any]) -> dict[str, Any]:
    """`dragate check -o json` on one Pod, against the cluster's objects."""
    result = subprocess.run(
        [DRAGATE, "check", "--policies", str(policies), "--state", str(state), "-o", "json", "-"],
        input=json.dumps(pod),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode in (0, 1), result.stderr
    verdicts = [v for v in json.loads(result.stdout) if v["kind"] == "Pod"]
    return dict(verdicts[0])


def migrated(pod: dict[str, Any], policies: Path) -> list[dict[str, Any]]:
    result = subprocess.run(
        [DRAGATE, "migrate", "--policies", str(policies), "-"],
        input=yaml.safe_dump(pod),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def state_file(cluster: Cluster, path: Path) -> Path:
    objects = cluster.get_json("namespaces,deviceclasses,resourceslices")["items"]
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


REPRESENTATIVE = ("gpu-1", "gpu-9", "family-hopper", "mig-1g-1", "mig-3g-3",
                  "gpu-2-and-mig-one-container")  # fmt: skip
"""Rows of the legacy table that also run on the older minors: bound whole GPUs, a denial,
a node selector, a MIG slice, an unschedulable slice count, whole GPUs and slices together."""
OLDER_TABLE = [row for row in TABLE if row[0] in REPRESENTATIVE]


@pytest.mark.parametrize("row", TABLE, ids=[row[0] for row in TABLE])
def test_legacy_pod_through_the_webhook_and_migrate(
    dragate_on_sched: tuple[Cluster, Path], tmp_path: Path, row: Row
) -> None:
    legacy_pod_case(dragate_on_sched, tmp_path, row)


@pytest.mark.kube_matrix(older=True)
@pytest.mark.parametrize("row", OLDER_TABLE, ids=[row[0] for row in OLDER_TABLE])
def test_representative_legacy_pod_on_older_minors(
    dragate_on_sched: tuple[Cluster, Path], tmp_path: Path, row: Row
) -> None:
    legacy_pod_case(dragate_on_sched, tmp_path, row)


def legacy_pod_case(dragate_on_sched: tuple[Cluster, Path], tmp_path: Path, row: Row) -> None:
    case, containers, init, selector, expected = row
    cluster, policies = dragate_on_sched
    pod = legacy_pod(case, "legacy", containers, init, selector)
    checked = check_verdict(policies, state_file(cluster, tmp_path / "state.json"), pod)
    created = kubectl_json(cluster, "create", pod, check=False)
    assert (created.returncode == 0) == checked["allowed"], (created.stderr, checked)
    if expected == DENIED:
        assert created.returncode != 0
        for reason in checked["reasons"]:
            assert reason.split("] ", 1)[-1][:60] in created.stderr, (reason, created.stderr)
        return
    assert created.returncode == 0, created.stderr
    try:
        assert_outcome(cluster, "legacy", case, expected, created.stderr)
    finally:
        force_delete(cluster, "legacy", f"pod/{case}")
    documents = migrated({**pod, "metadata": {"name": case, "namespace": "migrated"}}, policies)
    kubectl_json(cluster, "apply", {"apiVersion": "v1", "kind": "List", "items": documents})
    try:
        assert_outcome(cluster, "migrated", case, expected, "")
    finally:
        force_delete(cluster, "migrated", f"pod/{case}")


def assert_outcome(cluster: Cluster, ns: str, name: str, expected: str, warnings: str) -> None:
    outcome, pod = pod_outcome(cluster, ns, name)
    assert outcome == expected, pod.get("status")
    if outcome == BOUND:
        devices = allocated_devices(cluster, ns, pod)
        assert devices and all(d.startswith(pod["spec"]["nodeName"] + "/") for d in devices)
    elif warnings:
        # feasibility warnings name the pod claim (kubectl shows the first 120 characters)
        assert "Warning: dragate: pod claim" in warnings, warnings


# --- 4. the moment of charge: ResourceQuota vs dragate ----------------------------------------


def template_pod(ns: str, count: int) -> list[dict[str, Any]]:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "eight", "namespace": ns},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count},
                        }
                    ]
                }
            }
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "uses-eight", "namespace": ns},
        "spec": {
            "containers": [{"name": "m", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "eight"}],
        },
    }
    return [template, pod]


@pytest.mark.kube_matrix
def test_moment_of_charge_resourcequota_later_dragate_at_the_pods_create(
    dragate_on_sched: tuple[Cluster, Path],
) -> None:
    """Over quota by a template claim: ResourceQuota admits the Pod and refuses the claim the
    resourceclaim controller generates later (the Pod waits, with an event); dragate denies the
    Pod at its CREATE with the numbers."""
    from .processes import wait_for

    cluster, _ = dragate_on_sched
    hard = {quota_key("gpu.nvidia.com"): "4"}
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "dra", "namespace": "charge-quota"},
        "spec": {"hard": hard},
    }
    kubectl_json(cluster, "create", quota)
    wait_quota_ready(cluster, ["charge-quota"])
    template, pod = template_pod("charge-quota", 8)
    kubectl_json(cluster, "create", template)
    kubectl_json(cluster, "create", pod)  # admitted: nothing is charged for the Pod itself

    def refused_later() -> bool:
        events = cluster.get_json("events", "-n", "charge-quota")["items"]
        return any(
            e.get("reason") == "FailedResourceClaimCreation"
            and "exceeded quota" in e.get("message", "")
            for e in events
        )

    wait_for(refused_later, timeout=60, interval=0.5, what="the generated claim's refusal")
    assert not cluster.get_json("resourceclaims", "-n", "charge-quota")["items"]
    force_delete(cluster, "charge-quota", "pod/uses-eight")

    template, pod = template_pod("charge-dragate", 8)
    kubectl_json(cluster, "create", template)
    denied = kubectl_json(cluster, "create", pod, check=False)
    assert denied.returncode != 0
    assert "requested 8 > limit 4" in denied.stderr, denied.stderr
