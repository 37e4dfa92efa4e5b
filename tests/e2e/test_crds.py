"""The shipped CRDs in the real kube-apiserver: they install, and judge policies as the loader does.

Every file of webhook/defaults/crds/ is applied (a CEL rule the API server cannot compile, or
one over its cost limit, would make its CRD invalid here). Then each document of the shared
table (tests/policy/crd_documents.py) is created on a server-side dry run with strict field
validation, kubectl's default: the API server must accept exactly what the loader accepts,
except the cases the table names as the loader's alone. The example policies of policies/
apply as objects, `kubectl get` prints the printer columns, and a PolicyReport shaped as
Kyverno writes one is stored. On every supported Kubernetes minor (`kube_matrix`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from policy.crd_documents import CASES, Case

from webhook.policy.policycrds import crd_texts

from .cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.kube_matrix]

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "webhook" / "defaults" / "crds"


@pytest.fixture(scope="module")
def crds(kube_cluster: Cluster) -> Cluster:
    kube_cluster.kubectl("apply", "--server-side", "-f", str(CRD_DIR))
    names = [f"crd/{name}" for name in _crd_names()]
    kube_cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    return kube_cluster


def _crd_names() -> list[str]:
    return [yaml.safe_load(text)["metadata"]["name"] for text in crd_texts().values()]


def test_every_shipped_crd_is_established(crds: Cluster) -> None:
    for name in _crd_names():
        crd = crds.get_json(f"crd/{name}")
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("Established") == "True", (name, crd["status"])
        assert conditions.get("NonStructuralSchema") is None, name


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_api_server_judges_as_the_loader(crds: Cluster, case: Case) -> None:
    result = crds.kubectl(
        "create", "--dry-run=server", "--validate=strict", "-o", "name", "-f", "-",
        input=json.dumps(case.document()), check=False,
    )  # fmt: skip
    accepted = result.returncode == 0
    assert accepted is case.api_accepts, (
        f"API server {'accepted' if accepted else 'refused'} {case.id} "
        f"(loader {'accepts' if case.loads else 'refuses'}): {result.stderr}"
    )


def test_example_policies_apply_as_objects(crds: Cluster) -> None:
    applied = crds.kubectl(
        "apply", "--server-side", "--validate=strict", "-f", str(REPO / "policies")
    )
    try:
        assert "tenant.dragate.io/ml-research serverside-applied" in applied.stdout, applied.stdout
        kinds = {json.loads(line)["kind"] for line in _objects(crds)}
        assert kinds == {"Tenant", "DeviceClassPolicy", "LegacyResourceMapping", "Settings"}
    finally:  # a dragate serving the cluster later would enforce them
        crds.kubectl("delete", "--ignore-not-found", "-f", str(REPO / "policies"), check=False)


def _objects(cluster: Cluster) -> list[str]:
    listed = cluster.get_json("tenants,deviceclasspolicies,legacyresourcemappings,settings")
    return [json.dumps(item) for item in listed["items"]]


def test_kubectl_get_tenants_shows_namespaces_and_usage(crds: Cluster) -> None:
    crds.apply(json.dumps({
        "apiVersion": "dragate.io/v1alpha1", "kind": "Tenant", "metadata": {"name": "columns"},
        "spec": {"namespaces": ["columns-a"], "quota": [{"deviceClassName": "gpu.nvidia.com",
                                                          "maxDevices": 4}]},
    }))  # fmt: skip
    status = {"status": {
        "observedGeneration": 1, "usageSummary": "gpu.nvidia.com=3/4",
        "usage": [{"deviceClassName": "gpu.nvidia.com", "used": 3, "limit": 4}],
        "conditions": [{"type": "Ready", "status": "True", "reason": "Loaded", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }}  # fmt: skip
    crds.kubectl("patch", "tenant/columns", "--subresource=status", "--type=merge",
                 "-p", json.dumps(status))  # fmt: skip
    table = crds.kubectl("get", "tenants", "columns").stdout.splitlines()
    assert table[0].split() == ["NAME", "NAMESPACES", "USAGE", "ENFORCEMENT", "READY", "AGE"], table
    assert table[1].split()[:3] == ["columns", '["columns-a"]', "gpu.nvidia.com=3/4"], table
    short = crds.kubectl("get", "tnt", "columns", "-o", "name").stdout.strip()
    assert short == "tenant.dragate.io/columns"


def test_status_is_a_subresource(crds: Cluster) -> None:
    """A spec write cannot set the status: only the status writer's PUT/PATCH does."""
    crds.apply(json.dumps({
        "apiVersion": "dragate.io/v1alpha1", "kind": "DeviceClassPolicy",
        "metadata": {"name": "status-kept"}, "spec": {"maxCountPerRequest": 2},
        "status": {"observedGeneration": 9},
    }))  # fmt: skip
    stored = crds.get_json("deviceclasspolicy/status-kept")
    assert "status" not in stored or "observedGeneration" not in stored["status"]
    table = crds.kubectl("get", "dcp", "status-kept").stdout.splitlines()
    assert table[0].split()[:2] == ["NAME", "CLASSES"] and "READY" in table[0], table


KYVERNO_REPORT = {
    "apiVersion": "wgpolicyk8s.io/v1alpha2",
    "kind": "PolicyReport",
    "metadata": {"name": "pod-gpu-train", "namespace": "default"},
    "scope": {"apiVersion": "v1", "kind": "Pod", "name": "train", "namespace": "default",
              "uid": "5e0f3e2a-0000-4000-8000-000000000001"},
    "summary": {"pass": 1, "fail": 1, "warn": 0, "error": 0, "skip": 0},
    "results": [
        {"policy": "gpu-guardrails", "rule": "max-count", "result": "fail",
         "message": "at most 4 devices", "severity": "medium", "category": "DRA",
         "source": "dragate", "scored": True,
         "timestamp": {"seconds": 1767225600, "nanos": 0},
         "resources": [{"apiVersion": "v1", "kind": "Pod", "name": "train",
                        "namespace": "default"}],
         "properties": {"requested": "8", "limit": "4"}},
        {"policy": "require-labels", "result": "pass", "source": "kyverno",
         "timestamp": {"seconds": 1767225600, "nanos": 5}},
    ],
}  # fmt: skip


def test_policy_report_as_kyverno_writes_it(crds: Cluster) -> None:
    crds.kubectl("create", "--validate=strict", "-f", "-", input=json.dumps(KYVERNO_REPORT))
    table = crds.kubectl("get", "polr", "-n", "default", "pod-gpu-train").stdout.splitlines()
    header = ["NAME", "KIND", "NAME", "PASS", "FAIL", "WARN", "ERROR", "SKIP", "AGE"]
    assert table[0].split() == header, table
    assert table[1].split()[1:8] == ["Pod", "train", "1", "1", "0", "0", "0"], table
    cluster_report = {**KYVERNO_REPORT, "kind": "ClusterPolicyReport",
                      "metadata": {"name": "cluster-gpu"}}  # fmt: skip
    crds.kubectl("create", "--validate=strict", "-f", "-", input=json.dumps(cluster_report))
    assert crds.get_json("cpolr", "cluster-gpu")["summary"]["fail"] == 1
