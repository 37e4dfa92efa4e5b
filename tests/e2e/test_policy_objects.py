"""Policies as cluster objects, end to end on the real API server: the CRDs applied, a
`dragate serve --kubeconfig` started without `--policies` enforcing the Tenants and
DeviceClassPolicies applied with kubectl within seconds, mistakes refused at apply, usage in
`kubectl get tenants`, a Warn rollout, and the background audit's PolicyReports."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .cluster import Cluster
from .dragate_server import DRAGATE, DragateServer
from .processes import wait_for

pytestmark = pytest.mark.e2e

CRDS = Path(__file__).resolve().parents[2] / "webhook" / "defaults" / "crds"
NAMESPACE = "po-team"
GPU = "gpu.nvidia.com"


def tenant(max_devices: int, enforcement: str | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaces": [NAMESPACE],
        "quota": [{"deviceClassName": GPU, "maxDevices": max_devices}],
        **extra,
    }
    if enforcement:
        spec["enforcement"] = enforcement
    return {"apiVersion": "dragate.io/v1alpha1", "kind": "Tenant",
            "metadata": {"name": "po-team"}, "spec": spec}  # fmt: skip


def claim(name: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": GPU, "count": count}}]}},
    }  # fmt: skip


def apply(cluster: Cluster, obj: dict[str, Any], *flags: str) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("apply", *flags, "-f", "-", input=json.dumps(obj), check=False)


def create(cluster: Cluster, obj: dict[str, Any], *flags: str) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("create", *flags, "-f", "-", input=json.dumps(obj), check=False)


def settle(served: DragateServer, condition: Any, what: str, timeout: float = 30) -> None:
    """wait_for, failing with the server's log."""
    try:
        wait_for(condition, timeout=timeout, interval=0.3, what=what)
    except TimeoutError as error:
        raise AssertionError(f"{error}\n{served.log_tail(120)}") from None


def everywhere(check: Any, in_a_row: int = 6) -> bool:
    """`check` holds for `in_a_row` requests in a row: each gunicorn worker reloads the
    policy objects on its own, and the API server's connections reach any of them."""
    return all(check() for _ in range(in_a_row))


def confirmed(cluster: Cluster) -> bool:
    """No pending holder (a record with an expiry) left in the tenant's ledger object."""
    records = str(cluster.get_json("tenantusage", "po-team")["spec"]["records"])
    return all(len(line.split()) == 2 for line in records.splitlines() if line.strip())


def tenant_status(cluster: Cluster) -> dict[str, Any]:
    found: dict[str, Any] = cluster.get_json("tenant", "po-team").get("status") or {}
    return found


@pytest.fixture(scope="module")
def served(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DragateServer]:
    """The CRDs, a namespace, `dragate serve --kubeconfig` without --policies, and its own
    `dragate webhook-config` applied (the policy kinds' webhook included)."""
    for crd in sorted(CRDS.glob("*.yaml")):
        cluster.kubectl("apply", "--server-side", "-f", str(crd))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    cluster.kubectl(
        "delete",
        "tenants,deviceclasspolicies,legacyresourcemappings,settings",
        "--all",
        check=False,
    )  # fmt: skip  (only this module's policies in force)
    cluster.kubectl("create", "namespace", NAMESPACE)
    workdir = tmp_path_factory.mktemp("policy-objects")
    command = [
        DRAGATE, "serve", "--kubeconfig", str(cluster.kubeconfig), "--host", "{host}",
        "--port", "{port}", "--cert-dir", "{cert_dir}",
        "--graceful-timeout", "5", "--probe-port", "0",
    ]  # fmt: skip
    server = DragateServer.launch(command, workdir, name="dragate-objects")
    ca = workdir / "ca.crt"
    ca.write_bytes(server.ca_bundle_pem)
    config = subprocess.run(
        [DRAGATE, "webhook-config", "--url", server.base_url, "--ca-bundle", str(ca)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    cluster.kubectl("apply", "-f", "-", input=config)
    try:
        yield server
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration,mutatingwebhookconfiguration",
                        "dragate", "--ignore-not-found", check=False)  # fmt: skip
        server.stop()
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
        cluster.kubectl("delete", "tenants,deviceclasspolicies", "--all", check=False)


def test_a_tenant_applied_with_kubectl_is_enforced_and_shows_its_usage(
    cluster: Cluster, served: DragateServer
) -> None:
    assert apply(cluster, tenant(4)).returncode == 0
    settle(served, lambda: everywhere(lambda: "quota for gpu.nvidia.com exceeded" in create(
        cluster, claim("too-big", 5), "--dry-run=server").stderr),
        "the Tenant object to be enforced by every worker")  # fmt: skip
    for n in range(3):
        assert create(cluster, claim(f"c{n}", 1)).returncode == 0
    settle(
        served,
        lambda: tenant_status(cluster).get("usageSummary") == f"{GPU}=3/4",
        "usage 3/4 in the Tenant's status",
    )
    status = tenant_status(cluster)
    assert status["usage"] == [{"deviceClassName": GPU, "used": 3, "limit": 4}]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["observedGeneration"] == status["observedGeneration"]
    table = cluster.kubectl("get", "tenants").stdout
    assert "po-team" in table and f"{GPU}=3/4" in table, table
    # a deleted claim is released at the reconciler's next pass, run on its deletion
    settle(served, lambda: confirmed(cluster), "the reconciler to confirm the claims", 45)
    cluster.kubectl("delete", "resourceclaim", "c2", "-n", NAMESPACE)
    settle(
        served,
        lambda: tenant_status(cluster).get("usageSummary") == f"{GPU}=2/4",
        "the deleted claim freed in status",
        timeout=60,
    )


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        pytest.param(tenant(4, quotas=[]), "spec.quotas", id="tenant-unknown-field"),
        pytest.param(
            {"apiVersion": "dragate.io/v1alpha1", "kind": "DeviceClassPolicy",
             "metadata": {"name": "po-cnt"},
             "spec": {"deviceClassNames": [GPU],
                      "validations": [{"expression": "request.cnt <= 4", "message": "m"}]}},
            "cnt", id="class-policy-unknown-request-field"),
    ],
)  # fmt: skip
def test_a_policy_object_that_would_not_load_is_refused_at_apply(
    cluster: Cluster, served: DragateServer, obj: dict[str, Any], field: str
) -> None:
    result = apply(cluster, obj)
    assert result.returncode != 0, result.stdout
    assert field in result.stderr, result.stderr


def test_warn_admits_over_quota_with_the_numbers_then_the_audit_reports_it(
    cluster: Cluster, served: DragateServer
) -> None:
    assert apply(cluster, tenant(2, "Warn")).returncode == 0

    def warned() -> bool:  # admitted, with the would-be denial as a warning
        probe = create(cluster, claim("w-probe", 9), "--dry-run=server")
        return probe.returncode == 0 and "[Warn]" in probe.stderr

    settle(served, lambda: everywhere(warned), "the Warn rollout to be served by every worker")
    create(cluster, claim("w-fill", 2))  # the tenant's 2 devices in use, whatever ran before
    admitted = create(cluster, claim("over", 1))
    hooks = cluster.kubectl("get", "validatingwebhookconfigurations", "-o", "name").stdout
    assert admitted.returncode == 0, f"{admitted.stderr}\n{hooks}\n{served.log_tail(80)}"
    assert "Warning: dragate: [Warn]" in admitted.stderr, admitted.stderr
    assert "limit 2" in admitted.stderr, admitted.stderr

    def failing() -> list[dict[str, Any]]:
        report = cluster.get_json("policyreport", "dragate", "-n", NAMESPACE)
        return [r for r in report["results"] if r["result"] == "fail"]

    # the quota lowered below what is held: the audit's next pass (a policy change starts
    # one within seconds) reports every claim of the tenant as failing
    assert apply(cluster, tenant(1, "Audit")).returncode == 0
    settle(served, lambda: len(failing()) >= 2, "fail results in the namespace's PolicyReport", 60)
    result = failing()[0]
    assert result["policy"] == "Tenant/po-team" and result["source"] == "dragate"
    assert result["properties"]["limit"] == "1" and result["properties"]["tenant"] == "po-team"
    assert result["resources"][0]["kind"] == "ResourceClaim"

    def tenant_failing() -> bool:
        tenants = cluster.get_json("clusterpolicyreport", "dragate")["results"]
        return any(r["result"] == "fail" and r["resources"][0]["name"] == "po-team"
                   for r in tenants)  # fmt: skip

    settle(served, tenant_failing, "the tenant's own fail result in the ClusterPolicyReport", 10)
