"""dragate end to end: the real `dragate serve --kubeconfig` (gunicorn, TLS, watch caches,
TenantUsage ledger, reconciler) registered through the Helm chart in url mode, driven with
the real kubectl against kube-apiserver v1.37 and kube-controller-manager.

One dragate server and one Helm release serve the whole module (`dragate` fixture); every
scenario has its own tenant (tests/e2e/data/policies/e2e-tenants.yaml), so none shares quota
with another. Scenarios that stop the server or change the failure policy restore both.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from webhook.ledger import wants
from webhook.ledger.tenantusage import records_of
from webhook.policy.loading import load_policies
from webhook.rewrite import REWRITTEN_LABEL
from webhook.rewrite.admissionpolicy import rewrite_policy

from .cluster import Cluster
from .dragate_server import (
    CRD,
    DRAGATE,
    DragateServer,
    install_chart,
    inventory_manifest,
    resource_slice,
    scenario_policies,
    serve_command,
    slow_stub_command,
)
from .processes import wait_for
from .webhooks import WebhookSettings, register_webhooks, start_webhook_server

pytestmark = pytest.mark.e2e

RELEASE = "dragate-scn"  # contains the chart name, so it is also the objects' full name
RELEASE_NS = "dragate-scn"
TENANT_NAMESPACES = (
    "scn-rewrite", "scn-quota", "scn-dryrun", "scn-beta", "scn-outage", "scn-race", "scn-judged",
    "scn-map", "scn-warn",
)  # fmt: skip
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
MANAGED_BY = "app.kubernetes.io/managed-by"
ADMIN_ACCESS = "resource.kubernetes.io/admin-access"
CLAIMS_HOOK = "claims.validate.dragate.io"
PODS_HOOK, REWRITE_HOOK = "pods.validate.dragate.io", "pods.mutate.dragate.io"
REWRITTEN_PODS_HOOK = "rewritten-pods.validate.dragate.io"
POD_HOOKS = (PODS_HOOK, REWRITTEN_PODS_HOOK, REWRITE_HOOK)
GOLDEN = Path(__file__).resolve().parents[1] / "rewrite" / "golden"
SLICES = (resource_slice("scn-node-a", gpus=8), resource_slice("scn-node-b", gpus=8, migs=7))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# --- manifests ---------------------------------------------------------------------------


def claim(name: str, count: int, device_class: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}}]}},
    }  # fmt: skip


def v1beta1_claim(name: str, count: int) -> dict[str, Any]:
    """The flat v1beta1 request shape (no `exactly:`)."""
    return {
        "apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": count}]}},
    }  # fmt: skip


def legacy_container(gpus: int) -> dict[str, Any]:
    return {"name": "main", "image": "registry.example/cuda:12",
            "resources": {"limits": {"nvidia.com/gpu": gpus, "cpu": "1"}}}  # fmt: skip


def legacy_pod(name: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [legacy_container(gpus)]}}  # fmt: skip


def legacy_deployment(name: str, gpus: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [legacy_container(gpus)]}}},
    }  # fmt: skip


# --- helpers -----------------------------------------------------------------------------


def kubectl_input(
    cluster: Cluster, verb: str, obj: dict[str, Any], namespace: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    """`kubectl VERB -n NS -f -` with `obj`; never raises (callers look at returncode)."""
    return cluster.kubectl(
        verb, "-n", namespace, *flags, "-f", "-", input=json.dumps(obj), check=False
    )


def denial(result: subprocess.CompletedProcess[str]) -> str:
    """The webhook's message in kubectl's error, or fail if kubectl succeeded."""
    assert result.returncode != 0, f"expected a denial, got:\n{result.stdout}{result.stderr}"
    marker = "denied the request: "
    assert marker in result.stderr, result.stderr
    return result.stderr.split(marker, 1)[1].strip()


def admission_work(cluster: Cluster) -> Counter[tuple[str, str]]:
    """The API server's own counts, for the chart's Pod webhooks: ("called", name) from
    `apiserver_admission_webhook_request_total`, ("excluded", name): skipped on a false
    matchCondition, `apiserver_admission_match_condition_exclusions_total` (the API server
    counts no evaluation that holds)."""
    text = cluster.kubectl("get", "--raw", "/metrics").stdout
    families = {
        "apiserver_admission_webhook_request_total": "called",
        "apiserver_admission_match_condition_exclusions_total": "excluded",
    }
    work: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            what, name = families.get(sample.name), sample.labels.get("name", "")
            if what and name in POD_HOOKS:
                work[what, name] += int(sample.value)
    return work


def stored_holders(cluster: Cluster, tenant: str) -> dict[str, dict[str, int]]:
    """The tenant's TenantUsage holders as stored now: key -> devices per class ({} when
    absent). Grants and wants (`webhook.ledger.grants`) are the replicas' shares of the
    quota, not holders, and are left out."""
    found = cluster.kubectl("get", "tenantusage", tenant, "-o", "json", "--ignore-not-found")
    if not found.stdout.strip():
        return {}
    records = records_of(json.loads(found.stdout))
    internal = (wants.GRANT_PREFIX, wants.WANT_PREFIX)
    return {k: dict(r.devices) for k, r in records.items() if not k.startswith(internal)}


def holders(
    cluster: Cluster, tenant: str, expected: dict[str, dict[str, int]] | None = None
) -> dict[str, dict[str, int]]:
    """`stored_holders`, once they are `expected` (or, without it, once they stop changing):
    an admission answered from a grant is written moments after its answer."""
    if expected is not None:
        with contextlib.suppress(TimeoutError):  # the caller's assertion shows the difference
            wait_for(lambda: stored_holders(cluster, tenant) == expected, timeout=10,
                     interval=0.1, what="the admitted holders written")  # fmt: skip
        return stored_holders(cluster, tenant)
    seen = [stored_holders(cluster, tenant)]

    def unchanged() -> bool:
        seen.append(stored_holders(cluster, tenant))
        return seen[-1] == seen[-2]

    wait_for(unchanged, timeout=10, interval=0.3, what="the stored holders to settle")
    return seen[-1]


def pending(cluster: Cluster, tenant: str) -> set[str]:
    """Holders not confirmed by the reconciler yet (they carry expiresAt); not grants."""
    found = records_of(cluster.get_json("tenantusage", tenant))
    internal = (wants.GRANT_PREFIX, wants.WANT_PREFIX)
    return {k for k, r in found.items() if r.expires_at is not None and not k.startswith(internal)}


def claim_names(cluster: Cluster, namespace: str) -> set[str]:
    listed = cluster.kubectl("get", "resourceclaims", "-n", namespace, "-o", "name").stdout
    return {line.split("/", 1)[1] for line in listed.split()}


def wait_admitted(cluster: Cluster, obj: dict[str, Any], namespace: str) -> None:
    """Server-side dry runs until `obj` is admitted (webhook configuration changes reach the
    apiserver's admission chain asynchronously)."""

    def admitted() -> bool:
        return kubectl_input(cluster, "create", obj, namespace, "--dry-run=server").returncode == 0

    wait_for(admitted, timeout=30, interval=0.3, what=f"{obj['kind']} to be admitted")


def wait_refused(cluster: Cluster, obj: dict[str, Any], namespace: str, text: str) -> None:
    def refused() -> bool:
        result = kubectl_input(cluster, "create", obj, namespace, "--dry-run=server")
        return result.returncode != 0 and text in result.stderr

    wait_for(refused, timeout=30, interval=0.3, what=f"{obj['kind']} to be refused ({text})")


# --- the module's dragate ------------------------------------------------------------------


@pytest.fixture(scope="module")
def dragate(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DragateServer]:
    """CRD, inventory and tenant namespaces; `dragate serve --kubeconfig` with 2 gunicorn
    workers; the chart installed in url mode; returns once dragate demonstrably judges and
    rewrites. Everything is removed afterwards, whatever happened."""
    cluster.kubectl("apply", "-f", str(CRD))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    "crd/tenantusages.dragate.io")  # fmt: skip
    cluster.apply(inventory_manifest(SLICES))
    for namespace in TENANT_NAMESPACES:
        cluster.kubectl("create", "namespace", namespace)
    policies = scenario_policies(tmp_path_factory.mktemp("scenarios") / "policies")
    server: DragateServer | None = None
    installed = False
    try:
        server = DragateServer.launch(serve_command(cluster.kubeconfig, policies), cluster.workdir)
        install_chart(cluster, RELEASE, RELEASE_NS, server.base_url, server.ca_bundle_pem)
        installed = True

        def fires() -> bool:  # validating (a quota denial) and mutating (the rewrite warning)
            denied = kubectl_input(cluster, "create", claim("probe", 5), "scn-quota",
                                   "--dry-run=server")  # fmt: skip
            rewritten = kubectl_input(cluster, "create", legacy_pod("probe", 1), "scn-rewrite",
                                      "--dry-run=server")  # fmt: skip
            return (
                "tenant 'scn-quota' allows at most 4 per claim" in denied.stderr
                and 'Warning: dragate: container "main"' in rewritten.stderr
            )

        try:
            wait_for(fires, timeout=60, interval=0.5, what="dragate to judge and rewrite")
        except TimeoutError as error:
            raise AssertionError(f"{error}\n{server.log_tail()}") from None
        yield server
    finally:
        if installed:
            cluster.helm("uninstall", RELEASE, "--namespace", RELEASE_NS, check=False)
        if server is not None:
            server.stop()
        for namespace in (*TENANT_NAMESPACES, RELEASE_NS):
            cluster.kubectl("delete", "namespace", namespace, "--wait=false",
                            "--ignore-not-found", check=False)  # fmt: skip
        for tenant in TENANT_NAMESPACES:
            cluster.kubectl("delete", "tenantusage", tenant, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false",
                        input=inventory_manifest(SLICES), check=False)  # fmt: skip


# --- 1. legacy Pod rewritten ----------------------------------------------------------------


def test_legacy_gpu_pod_is_rewritten(cluster: Cluster, dragate: DragateServer) -> None:
    ns = "scn-rewrite"
    before = admission_work(cluster)
    applied = cluster.apply(json.dumps(legacy_pod("vllm", 2)), ns)
    work = admission_work(cluster) - before

    assert 'Warning: dragate: container "main": nvidia.com/gpu=2 -> claim ' in applied.stderr
    # The API server's count: the mutating webhook called, then skipped on its CEL in the
    # reinvocation round the patch causes; the labelled Pod meets the validating entry
    # without matchConditions, never the other.
    assert work == {("called", REWRITE_HOOK): 1, ("excluded", REWRITE_HOOK): 1,
                    ("called", REWRITTEN_PODS_HOOK): 1}, work  # fmt: skip
    pod = cluster.get_json("pod", "vllm", "-n", ns)
    assert pod["metadata"]["labels"] == {REWRITTEN_LABEL: "true"}
    [pod_claim] = pod["spec"]["resourceClaims"]
    [container] = pod["spec"]["containers"]
    assert container["resources"]["claims"] == [{"name": pod_claim["name"]}]
    assert "nvidia.com/gpu" not in json.dumps(container["resources"])
    assert container["resources"]["limits"] == {"cpu": "1"}

    template = cluster.get_json("resourceclaimtemplate", pod_claim["resourceClaimTemplateName"],
                                "-n", ns)  # fmt: skip
    assert template["metadata"]["labels"][MANAGED_BY] == "dragate"
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert request["exactly"]["count"] == 2


def test_a_pod_labelled_by_hand_is_reviewed_all_the_same(
    cluster: Cluster, dragate: DragateServer
) -> None:
    """The rewrite's label only picks which validating entry judges a Pod: one without GPUs
    labelled by hand is sent (and allowed), one that asks for legacy GPUs is rewritten."""
    ns = "scn-rewrite"
    labels = {REWRITTEN_LABEL: "true"}
    app = {"name": "main", "image": "registry.example/app:1"}
    plain = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [app]},
             "metadata": {"name": "labelled-plain", "labels": labels}}  # fmt: skip
    legacy = legacy_pod("labelled-legacy", 1)
    legacy["metadata"]["labels"] = {REWRITTEN_LABEL: "yes"}
    before = admission_work(cluster)
    cluster.apply(json.dumps(plain), ns)
    cluster.apply(json.dumps(legacy), ns)
    work = admission_work(cluster) - before

    assert work == {("called", REWRITTEN_PODS_HOOK): 2, ("called", REWRITE_HOOK): 1,
                    ("excluded", REWRITE_HOOK): 2}, work  # fmt: skip
    rewritten = cluster.get_json("pod", "labelled-legacy", "-n", ns)
    assert rewritten["metadata"]["labels"] == {REWRITTEN_LABEL: "true"}
    assert "nvidia.com/gpu" not in json.dumps(rewritten["spec"]["containers"])


# --- 2. Deployment -> ReplicaSet -> Pod -> generated claim, counted once --------------------


def test_deployment_pod_claim_counted_once(cluster: Cluster, dragate: DragateServer) -> None:
    ns, tenant = "scn-rewrite", "scn-rewrite"
    cluster.apply(json.dumps(legacy_deployment("trainer", 2)), ns)
    try:
        pods: list[Any] = []

        def pod_created() -> bool:
            pods[:] = cluster.get_json("pods", "-n", ns, "-l", "app=trainer")["items"]
            return len(pods) == 1

        wait_for(pod_created, timeout=60, what="the ReplicaSet's Pod")
        [pod] = pods
        uid = pod["metadata"]["uid"]
        [pod_claim] = pod["spec"]["resourceClaims"]  # rewritten on the controller's CREATE
        assert "nvidia.com/gpu" not in json.dumps(pod["spec"]["containers"])

        generated: list[Any] = []

        def claim_generated() -> bool:
            items = cluster.get_json("resourceclaims", "-n", ns)["items"]
            generated[:] = [
                c for c in items
                if any(o["uid"] == uid for o in c["metadata"].get("ownerReferences", []))
            ]  # fmt: skip
            return len(generated) == 1

        try:
            wait_for(claim_generated, timeout=60, what="the resourceclaim controller's claim")
        except TimeoutError as error:
            raise AssertionError(f"{error}\n{cluster.diagnostics()}") from None
        [made] = generated
        assert made["metadata"]["annotations"][POD_CLAIM_NAME_ANNOTATION] == pod_claim["name"]

        key = f"pod:{uid}/{pod_claim['name']}"
        usage = holders(cluster, tenant, {key: {"gpu.nvidia.com": 2}})  # written after a grant
        assert usage.get(key) == {"gpu.nvidia.com": 2}, usage
        # The Pod's reservation is consumed by its generated claim, never a second holder.
        assert f"claim:{ns}/{made['metadata']['name']}" not in usage
        assert [k for k in usage if uid in k] == [key]
        # A ReplicaSet's Pod has only a generateName: the API server names it before the
        # validating webhook sees it, so the holder keyed by its uid carries its name.
        stored = records_of(cluster.get_json("tenantusage", tenant))
        assert stored[key].name == f"{ns}/{pod['metadata']['name']}", stored[key]
    finally:
        cluster.kubectl("delete", "deployment", "trainer", "-n", ns, "--wait=false")


# --- 2b. a rewrite over quota: judged before its template is made, by validation after -----


def test_rewrite_over_quota_is_denied_before_and_after_its_template_exists(
    cluster: Cluster, dragate: DragateServer
) -> None:
    """The first Pod of a shape has its template made, so the mutating webhook judges the
    rewrite first and nothing is left behind a denial; once the template exists the mutating
    webhook only patches, and the validating webhook denies the patched Pod with the numbers,
    kubectl still showing the rewrite's warning."""
    ns = "scn-judged"
    first = cluster.apply(json.dumps(legacy_pod("first", 2)), ns)  # reserves the tenant's 2
    assert 'Warning: dragate: container "main"' in first.stderr

    again = kubectl_input(cluster, "create", legacy_pod("again", 2), ns)
    message = denial(again)
    assert f'admission webhook "{REWRITTEN_PODS_HOOK}" denied the request' in again.stderr
    assert "used 2 + requested 2 > limit 2" in message
    assert 'Warning: dragate: container "main": nvidia.com/gpu=2 -> claim' in again.stderr

    bigger = kubectl_input(cluster, "create", legacy_pod("bigger", 3), ns)
    assert f'admission webhook "{REWRITE_HOOK}" denied the request' in bigger.stderr
    assert "used 2 + requested 3 > limit 2" in denial(bigger)
    templates = cluster.get_json("resourceclaimtemplates", "-n", ns)["items"]
    counts = [t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] for t in templates]
    assert counts == [2], "no template is made for a denied rewrite"
    assert {p["metadata"]["name"] for p in cluster.get_json("pods", "-n", ns)["items"]} == {"first"}


@pytest.fixture
def rewrite_policy_applied(
    cluster: Cluster, dragate: DragateServer, tmp_path: Path
) -> Iterator[str]:
    """`dragate rewrite-policy` for the scn-map tenant alone, applied; removed afterwards.
    Returns once the API server rewrites a legacy Pod itself (no webhook warning)."""
    ns = "scn-map"
    loaded = load_policies([scenario_policies(tmp_path / "policies")])
    only = replace(loaded, tenants=tuple(t for t in loaded.tenants if t.name == ns))
    made = rewrite_policy(only)
    assert made is not None and made.namespaces == (ns,)
    listed = json.dumps({"apiVersion": "v1", "kind": "List",
                         "items": [*made.objects, *made.templates]})  # fmt: skip
    cluster.apply(listed)

    def rewritten_by_the_policy() -> bool:
        result = kubectl_input(cluster, "create", legacy_pod("probe", 1), ns,
                               "--dry-run=server", "-o", "json")  # fmt: skip
        return (result.returncode == 0 and "Warning: dragate: container" not in result.stderr
                and "resourceClaims" in json.loads(result.stdout)["spec"])  # fmt: skip

    try:
        wait_for(rewritten_by_the_policy, timeout=60, interval=0.3, what="the rewrite policy")
        yield ns
    finally:
        for obj in made.objects:
            cluster.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"],
                            "--ignore-not-found", check=False)  # fmt: skip


def test_the_rewrite_policy_skips_the_mutating_webhook_and_validation_still_judges(
    cluster: Cluster, rewrite_policy_applied: str
) -> None:
    """The API server rewrites the legacy Pod itself, as the webhook would (no template to
    make: the policy's are applied with it), so dragate's mutating webhook is never called;
    the rewritten Pod meets the validating webhook once, which reserves its devices and
    denies the next one over the tenant's quota with the numbers."""
    ns = rewrite_policy_applied
    before = admission_work(cluster)
    applied = cluster.apply(json.dumps(legacy_pod("first", 2)), ns)
    work = admission_work(cluster) - before
    assert 'Warning: dragate: container "main"' not in applied.stderr  # the webhook's rewrite
    assert "multi-GPU request without a selector" in applied.stderr  # validation's guardrail
    assert work[("called", REWRITE_HOOK)] == 0, work
    assert work[("excluded", REWRITE_HOOK)] >= 1, work
    assert (work[("called", REWRITTEN_PODS_HOOK)], work[("called", PODS_HOOK)]) == (1, 0), work
    pod = cluster.get_json("pod", "first", "-n", ns)
    assert pod["metadata"]["labels"] == {REWRITTEN_LABEL: "true"}
    assert pod["spec"]["resourceClaims"] == [
        {"name": "gpu-main", "resourceClaimTemplateName": "dragate-gpu-nvidia-com-2"}
    ]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1"}

    again = kubectl_input(cluster, "create", legacy_pod("again", 2), ns)
    assert f'admission webhook "{REWRITTEN_PODS_HOOK}" denied the request' in again.stderr
    assert "used 2 + requested 2 > limit 2" in denial(again)


# --- 3. over quota ------------------------------------------------------------------------


def test_over_quota_claim_is_denied_with_numbers(cluster: Cluster, dragate: DragateServer) -> None:
    ns = "scn-quota"
    cluster.apply(json.dumps(claim("held", 3)), ns)

    result = kubectl_input(cluster, "apply", claim("big", 2), ns)

    message = denial(result)
    assert f'admission webhook "{CLAIMS_HOOK}" denied the request' in result.stderr
    assert "[Tenant/scn-quota]" in message
    assert "tenant 'scn-quota' quota for gpu.nvidia.com exceeded" in message
    assert "used 3 + requested 2 > limit 4" in message
    assert "held by claim:scn-quota/held (3)" in message
    assert claim_names(cluster, ns) == {"held"}
    assert set(holders(cluster, "scn-quota")) == {"claim:scn-quota/held"}


def test_over_quota_claim_of_a_warn_tenant_is_admitted_with_warnings_and_charged(
    cluster: Cluster, dragate: DragateServer
) -> None:
    """`enforcement: Warn`: kubectl shows the denial's numbers and holders as warnings, the
    claim is stored, and the ledger holds what is really held, over the limit."""
    ns = "scn-warn"
    cluster.apply(json.dumps(claim("held", 3)), ns)

    result = kubectl_input(cluster, "apply", claim("big", 2), ns)

    assert result.returncode == 0, result.stderr
    assert (
        "Warning: dragate: [Warn] tenant 'scn-warn' quota for gpu.nvidia.com exceeded: "
        "used 3 + requested 2 > limit 4 (scn-warn)"
    ) in result.stderr
    assert (
        "Warning: dragate: [Warn] Tenant/scn-warn: gpu.nvidia.com held by claim:scn-warn/held (3)"
        in result.stderr
    )
    assert claim_names(cluster, ns) == {"held", "big"}
    expected = {f"claim:{ns}/held": {"gpu.nvidia.com": 3}, f"claim:{ns}/big": {"gpu.nvidia.com": 2}}
    assert holders(cluster, ns, expected) == expected


# --- 4. server-side dry run writes nothing -------------------------------------------------


def test_dry_run_writes_nothing(cluster: Cluster, dragate: DragateServer) -> None:
    ns, tenant = "scn-dryrun", "scn-dryrun"
    cluster.apply(json.dumps(claim("real", 1)), ns)
    before = holders(cluster, tenant, {"claim:scn-dryrun/real": {"gpu.nvidia.com": 1}})
    assert before == {"claim:scn-dryrun/real": {"gpu.nvidia.com": 1}}

    fits = kubectl_input(cluster, "apply", claim("ghost", 3), ns, "--dry-run=server")
    assert fits.returncode == 0, fits.stderr
    assert "(server dry run)" in fits.stdout
    # Judged like a real one: a dry run over quota is refused, and still writes nothing.
    over = kubectl_input(cluster, "apply", claim("ghost-big", 4), ns, "--dry-run=server")
    assert "used 1 + requested 4 > limit 4" in denial(over)

    assert claim_names(cluster, ns) == {"real"}
    assert holders(cluster, tenant) == before
    # The quota is still all there: a real claim of the 3 the dry run "took" fits.
    cluster.apply(json.dumps(claim("after", 3)), ns)


# --- 5. v1beta1 claims ----------------------------------------------------------------------


def test_v1beta1_claim_judged_like_v1(cluster: Cluster, dragate: DragateServer) -> None:
    ns, tenant = "scn-beta", "scn-beta"
    cluster.apply(json.dumps(claim("base", 2)), ns)

    v1_message = denial(kubectl_input(cluster, "create", claim("over", 3), ns))
    beta_message = denial(kubectl_input(cluster, "create", v1beta1_claim("over", 3), ns))
    assert beta_message == v1_message
    assert "used 2 + requested 3 > limit 4" in beta_message

    admitted = kubectl_input(cluster, "create", v1beta1_claim("fits", 2), ns)
    assert admitted.returncode == 0, admitted.stderr
    stored = cluster.get_json("resourceclaims.v1.resource.k8s.io", "fits", "-n", ns)
    assert stored["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    both = {
        "claim:scn-beta/base": {"gpu.nvidia.com": 2},
        "claim:scn-beta/fits": {"gpu.nvidia.com": 2},
    }
    assert holders(cluster, tenant, both) == both


def test_a_claim_for_a_device_class_that_does_not_exist_is_admitted_with_a_warning(
    cluster: Cluster, dragate: DragateServer
) -> None:
    """The API server accepts a claim or template naming a class it does not have (the
    oracle: dragate warns, never denies); dragate names the class probably meant."""
    typo = claim("typo", 1, device_class="gpu.nvdia.com")
    template = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "typo"}, "spec": {"spec": typo["spec"]},
    }  # fmt: skip
    for obj in (typo, template):
        result = kubectl_input(cluster, "create", obj, "default", "--dry-run=server")
        assert result.returncode == 0, result.stderr
        assert (
            "Warning: dragate: request 'gpu': DeviceClass 'gpu.nvdia.com' does not exist "
            "(did you mean 'gpu.nvidia.com'?)"
        ) in result.stderr, result.stderr


# --- 6. admin-access label guard -------------------------------------------------------------


@pytest.fixture
def namespace_editors(cluster: Cluster) -> Iterator[str]:
    """RBAC letting the group `scn-ns-editors` label namespaces (so dragate, not RBAC, decides)."""
    group = "scn-ns-editors"
    cluster.kubectl("create", "clusterrole", group, "--verb=get,list,patch,update",
                    "--resource=namespaces")  # fmt: skip
    cluster.kubectl("create", "clusterrolebinding", group, f"--clusterrole={group}",
                    f"--group={group}")  # fmt: skip
    yield group
    cluster.kubectl("delete", "clusterrolebinding", group, "--ignore-not-found", check=False)
    cluster.kubectl("delete", "clusterrole", group, "--ignore-not-found", check=False)


def test_admin_access_label_guard(
    cluster: Cluster, dragate: DragateServer, namespace_editors: str
) -> None:
    ns = unique("scn-admin")
    cluster.kubectl("create", "namespace", ns)
    try:
        as_alice = ("--as=alice", f"--as-group={namespace_editors}")
        as_admin = ("--as=bob", f"--as-group={namespace_editors}", "--as-group=platform-admins")
        label = f"{ADMIN_ACCESS}=true"

        refused = cluster.kubectl("label", "ns", ns, label, *as_alice, check=False)
        message = denial(refused)
        assert "namespaces.validate.dragate.io" in refused.stderr
        assert f"user 'alice' may not set or change the {ADMIN_ACCESS} label" in message
        assert "group:platform-admins" in message
        assert ADMIN_ACCESS not in cluster.get_json("ns", ns)["metadata"].get("labels", {})

        cluster.kubectl("label", "ns", ns, label, *as_admin)
        assert cluster.get_json("ns", ns)["metadata"]["labels"][ADMIN_ACCESS] == "true"
        # Removing it is guarded too (the webhook also sees the old object's labels).
        removal = cluster.kubectl("label", "ns", ns, f"{ADMIN_ACCESS}-", *as_alice, check=False)
        assert "may not set or change" in denial(removal)
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


# --- 7. the webhook down: failurePolicy Fail vs Ignore ---------------------------------------


def test_webhook_down_fail_closed_then_ignore(cluster: Cluster, dragate: DragateServer) -> None:
    ns = "scn-outage"
    url, bundle = dragate.base_url, dragate.ca_bundle_pem
    dragate.stop()
    try:
        refused = kubectl_input(cluster, "create", claim("while-down", 1), ns)
        assert refused.returncode != 0
        assert f'failed calling webhook "{CLAIMS_HOOK}"' in refused.stderr, refused.stderr
        assert claim_names(cluster, ns) == set()

        install_chart(cluster, RELEASE, RELEASE_NS, url, bundle,
                      "webhook.validating.failurePolicy=Ignore")  # fmt: skip
        hooks = cluster.get_json("validatingwebhookconfiguration", RELEASE)["webhooks"]
        assert {h["failurePolicy"] for h in hooks} == {"Ignore"}
        # Fails open: even a claim over the tenant's quota of 2 gets in unjudged.
        wait_admitted(cluster, claim("while-down", 3), ns)
        admitted = kubectl_input(cluster, "create", claim("while-down", 3), ns)
        assert admitted.returncode == 0, admitted.stderr
        assert claim_names(cluster, ns) == {"while-down"}
    finally:
        install_chart(cluster, RELEASE, RELEASE_NS, url, bundle)
        dragate.start()
        cluster.kubectl("delete", "resourceclaim", "while-down", "-n", ns, "--ignore-not-found")
    hooks = cluster.get_json("validatingwebhookconfiguration", RELEASE)["webhooks"]
    assert {h["failurePolicy"] for h in hooks} == {"Fail"}
    # Restored: dragate judges again.
    wait_refused(cluster, claim("after", 3), ns, "quota for gpu.nvidia.com exceeded")


# --- 8. a webhook slower than timeoutSeconds ---------------------------------------------------


def timed_create(
    cluster: Cluster, obj: dict[str, Any], ns: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = kubectl_input(cluster, "create", obj, ns)
    return result, time.monotonic() - started


def test_slow_webhook_past_timeout(cluster: Cluster, dragate: DragateServer) -> None:
    ns = unique("scn-slow")  # in no tenant: dragate admits, only the slow stub matters
    cluster.kubectl("create", "namespace", ns)
    stub = start_webhook_server(slow_stub_command(delay=4.0), cluster.workdir, name=unique("slow"))
    only_ns = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
    name = unique("scn-slow")

    def register(policy: str) -> None:
        settings = WebhookSettings(failure_policy=policy, timeout_seconds=1, extra=only_ns)
        register_webhooks(cluster, stub.url("/validate"), None, stub.ca_bundle_pem,
                          name=name, settings=settings)  # fmt: skip

    try:
        register("Fail")
        wait_refused(cluster, claim("probe", 1), ns, "failed calling webhook")
        refused, seconds = timed_create(cluster, claim("slow-fail", 1), ns)
        assert refused.returncode != 0
        assert 'failed calling webhook "validate.dragate.io"' in refused.stderr, refused.stderr
        assert "deadline exceeded" in refused.stderr or "timeout" in refused.stderr.lower()
        assert 1.0 <= seconds < 4.0, f"refused after {seconds:.1f}s"

        register("Ignore")
        wait_admitted(cluster, claim("probe", 1), ns)
        admitted, seconds = timed_create(cluster, claim("slow-ignore", 1), ns)
        assert admitted.returncode == 0, admitted.stderr
        assert 1.0 <= seconds < 4.0, f"admitted after {seconds:.1f}s"
        assert claim_names(cluster, ns) == {"slow-ignore"}
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found")
        stub.stop()
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


# --- 9. dragate migrate output is valid Kubernetes --------------------------------------------


def served_kinds(cluster: Cluster) -> set[tuple[str, str]]:
    """(apiVersion, kind) pairs the API server serves."""
    listed = cluster.kubectl("api-resources", "--no-headers").stdout
    kinds = set()
    for line in listed.splitlines():
        fields = line.split()
        kinds.add((fields[-3], fields[-1]))  # ... APIVERSION NAMESPACED KIND
    return kinds


def documents(path: Path) -> Iterator[dict[str, Any]]:
    for doc in yaml.safe_load_all(path.read_text()):
        if not isinstance(doc, dict):
            continue
        if doc.get("kind") == "List":
            yield from doc.get("items") or []
        else:
            yield doc


def dry_run(cluster: Cluster, namespace: str, objects: list[dict[str, Any]]) -> str:
    """`kubectl apply --dry-run=server` of `objects` (namespace dropped): "" or the error."""
    for obj in objects:
        if not isinstance(obj.get("metadata"), dict):  # `metadata:` left empty (a golden input)
            obj["metadata"] = {}
        obj["metadata"].pop("namespace", None)
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    result = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-",
                             input=manifest, check=False)  # fmt: skip
    return "" if result.returncode == 0 else result.stderr


def api_kind(obj: dict[str, Any]) -> tuple[str, str]:
    return str(obj.get("apiVersion")), str(obj.get("kind"))


def key(obj: dict[str, Any]) -> tuple[str, str]:
    return str(obj.get("kind")), str((obj.get("metadata") or {}).get("name"))


def test_migrate_output_accepted_by_api_server(
    cluster: Cluster, dragate: DragateServer, tmp_path: Path
) -> None:
    inputs = sorted(GOLDEN.glob("*.in.yaml"))
    for source in inputs:
        (tmp_path / source.name).write_text(source.read_text())
    migrated = subprocess.run([DRAGATE, "migrate", "--write", str(tmp_path)],
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert migrated.returncode == 1, migrated.stderr  # some inputs keep a legacy request
    assert "legacy request(s) left" in migrated.stderr and "failed" not in migrated.stderr

    ns = unique("scn-migrate")  # in no tenant: the API server's validation is what is tested
    cluster.kubectl("create", "namespace", ns)
    served = served_kinds(cluster)
    checked: set[str] = set()
    skipped: set[tuple[str, str]] = set()  # (apiVersion, kind): kinds are matched by group too
    invalid_inputs: dict[str, str] = {}
    try:
        for source in inputs:
            before = [o for o in documents(source) if api_kind(o) in served]
            after = []
            for obj in documents(tmp_path / source.name):
                if api_kind(obj) in served:
                    after.append(obj)
                else:
                    skipped.add(api_kind(obj))
            # An input the API server refuses already (a golden edge case such as a 64-character
            # container name) cannot be accepted after rewriting either: check what migrate
            # added for it (its ResourceClaimTemplates), not the object itself.
            if dry_run(cluster, ns, list(before)):
                for obj in before:
                    if error := dry_run(cluster, ns, [obj]):
                        invalid_inputs[f"{source.name}: {'/'.join(key(obj))}"] = error.strip()
                refused = {key(o) for o in before if f"{source.name}: {'/'.join(key(o))}"
                           in invalid_inputs}  # fmt: skip
                after = [o for o in after if key(o) not in refused]
            if after:
                error = dry_run(cluster, ns, after)
                assert not error, f"dragate migrate output of {source.name} refused:\n{error}"
                checked.update(str(o["kind"]) for o in after)
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)

    built_in = {"Pod", "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicaSet",
                "ReplicationController", "PodTemplate", "ResourceClaimTemplate"}  # fmt: skip
    assert built_in <= checked, f"not checked: {built_in - checked}"
    # Only custom resources (KubeRay, Kubeflow, JobSet, LWS, Argo, KServe, Volcano) and old API
    # groups (extensions/v1beta1) are skipped.
    core = {"v1", "apps/v1", "batch/v1", "resource.k8s.io/v1"}
    assert skipped and not {k for v, k in skipped if v in core} & built_in, skipped
    print(f"checked: {sorted(checked)}; skipped (CRDs not installed): {sorted(skipped)}; "
          f"invalid golden inputs: {invalid_inputs}")  # fmt: skip


# --- 10. quota race through the webhook --------------------------------------------------------


def api_create(cluster: Cluster, namespace: str, obj: dict[str, Any]) -> tuple[int, str]:
    """POST `obj` to the API server as the admin: (HTTP status, the Status message or "")."""
    context = ssl.create_default_context(cafile=str(cluster.ca_path))
    context.load_cert_chain(
        cluster.pki.directory / "admin.crt", cluster.pki.directory / "admin.key"
    )
    url = f"{cluster.server_url}/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    request = urllib.request.Request(
        url, data=json.dumps(obj).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return int(response.status), ""
    except urllib.error.HTTPError as error:
        return error.code, str(json.loads(error.read()).get("message", ""))


def test_concurrent_claims_never_overcommit(cluster: Cluster, dragate: DragateServer) -> None:
    ns, tenant, quota, racers = "scn-race", "scn-race", 5, 12
    names = [f"racer-{n:02d}" for n in range(racers)]
    start = threading.Barrier(racers)

    def race(name: str) -> tuple[int, str]:
        start.wait(timeout=30)  # one burst: every request in flight at once
        return api_create(cluster, ns, claim(name, 1))

    # Threads with an HTTP client rather than 12 kubectl processes: on a 2-core machine the
    # processes' start-up alone can push a review past the webhook's 3 s timeout.
    with ThreadPoolExecutor(max_workers=racers) as pool:
        results = dict(zip(names, pool.map(race, names), strict=True))

    admitted = {name for name, (status, _) in results.items() if status == 201}
    refusals = [message for status, message in results.values() if status != 201]
    assert len(admitted) == quota, (results, dragate.log_tail())
    unexpected = [text for text in refusals if "quota for gpu.nvidia.com exceeded" not in text]
    assert not unexpected, "\n".join([*unexpected, dragate.log_tail()])
    assert claim_names(cluster, ns) == admitted
    truth = {f"claim:{ns}/{name}": {"gpu.nvidia.com": 1} for name in admitted}
    assert holders(cluster, tenant, truth) == truth

    def create(name: str) -> subprocess.CompletedProcess[str]:
        return kubectl_input(cluster, "create", claim(name, 1), ns)

    # The reconciler (every 15 s) rebuilds the same truth from the stored claims and
    # confirms the pending reservations without changing them.
    wait_for(lambda: not pending(cluster, tenant), timeout=40, interval=1,
             what="the reconciler to confirm the reservations")  # fmt: skip
    assert holders(cluster, tenant) == truth
    # The quota stays full...
    assert "used 5 + requested 1 > limit 5" in denial(create("late"))

    # ...until a claim is deleted: the delete wakes the reconciler, which holds the holder
    # for a 5 s grace (another replica's cache may lag) and drops it at its next 15 s pass.
    gone = sorted(admitted)[0]
    cluster.kubectl("delete", "resourceclaim", gone, "-n", ns)
    started = time.monotonic()
    wait_for(lambda: create("late").returncode == 0, timeout=45, interval=1,
             what=f"the device of deleted claim {gone} to be released")  # fmt: skip
    released = time.monotonic() - started
    print(f"quota released {released:.1f}s after the delete")
    assert released < 25, f"released {released:.1f}s after the delete: reconciler not woken?"
    truth = {**truth, f"claim:{ns}/late": {"gpu.nvidia.com": 1}}
    del truth[f"claim:{ns}/{gone}"]
    assert holders(cluster, tenant, truth) == truth


def test_dragate_stayed_healthy(dragate: DragateServer) -> None:
    """No worker crashed or logged a traceback during the scenarios."""
    assert dragate.is_running()
    log = dragate.log_tail(lines=100_000)
    assert "Traceback" not in log, log[-5000:]
