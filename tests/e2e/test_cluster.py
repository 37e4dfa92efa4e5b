"""The e2e control plane works: DRA APIs, controllers, and the admission webhook chain."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .cluster import Cluster
from .processes import wait_for
from .webhooks import RegisterWebhooks, StartWebhook, wait_until_webhook_fires

pytestmark = pytest.mark.e2e

STUB_WEBHOOK = Path(__file__).with_name("stub_webhook.py")
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def annotations_of(obj: Any) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations", {}))


# --- manifests -------------------------------------------------------------------------


def device_class_yaml(name: str) -> str:
    return f"""
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: {name}}}
spec:
  selectors:
  - cel: {{expression: "device.driver == 'gpu.example.com'"}}
"""


def v1_claim_yaml(name: str, device_class: str, count: int) -> str:
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}}}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {{deviceClassName: {device_class}, allocationMode: ExactCount, count: {count}}}
"""


def v1beta1_claim_yaml(name: str, device_class: str, count: int) -> str:
    return f"""
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {{name: {name}}}
spec:
  devices:
    requests:
    - {{name: gpu, deviceClassName: {device_class}, count: {count}}}
"""


def pod_yaml(name: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers: [{{name: main, image: registry.example/app:1}}]
"""


DEPLOYMENT_YAML = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example/web:1}]
"""


def template_and_pod_yaml(device_class: str) -> str:
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: one-gpu}}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {{deviceClassName: {device_class}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: trainer}}
spec:
  resourceClaims:
  - {{name: gpu, resourceClaimTemplateName: one-gpu}}
  containers:
  - name: main
    image: registry.example/trainer:1
    resources: {{claims: [{{name: gpu}}]}}
"""


# --- fixtures --------------------------------------------------------------------------


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    name = unique("e2e")
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


@pytest.fixture
def device_class(cluster: Cluster) -> Iterator[str]:
    name = unique("gpu") + ".example.com"
    cluster.apply(device_class_yaml(name))
    yield name
    cluster.kubectl("delete", "deviceclass", name, "--ignore-not-found")


# --- tests -----------------------------------------------------------------------------


def test_serves_dra_api_versions(cluster: Cluster) -> None:
    versions = cluster.kubectl("api-versions").stdout.split()
    for version in ("v1", "v1beta1", "v1beta2"):
        assert f"resource.k8s.io/{version}" in versions


def test_creates_device_class_and_v1_claim(
    cluster: Cluster, namespace: str, device_class: str
) -> None:
    cluster.apply(v1_claim_yaml("two-gpus", device_class, count=2), namespace)

    claim = cluster.get_json("-n", namespace, "resourceclaims.v1.resource.k8s.io", "two-gpus")
    exactly = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly == {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 2}
    assert cluster.get_json("deviceclass", device_class)["kind"] == "DeviceClass"


def test_v1beta1_claim_is_readable_as_v1(
    cluster: Cluster, namespace: str, device_class: str
) -> None:
    cluster.apply(v1beta1_claim_yaml("old-shape", device_class, count=3), namespace)

    claim = cluster.get_json("-n", namespace, "resourceclaims.v1.resource.k8s.io", "old-shape")
    assert claim["apiVersion"] == "resource.k8s.io/v1"
    exactly = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert (exactly["deviceClassName"], exactly["count"]) == (device_class, 3)
    beta2 = cluster.get_json("-n", namespace, "resourceclaims.v1beta2.resource.k8s.io", "old-shape")
    assert beta2["spec"]["devices"]["requests"][0]["exactly"]["count"] == 3


def test_deployment_yields_replicaset_and_pod(cluster: Cluster, namespace: str) -> None:
    cluster.apply(DEPLOYMENT_YAML, namespace)

    def has_one(resource: str) -> bool:
        return len(cluster.get_json("-n", namespace, resource, "-l", "app=web")["items"]) == 1

    wait_for(lambda: has_one("replicasets"), timeout=60, what="the Deployment's ReplicaSet")
    wait_for(lambda: has_one("pods"), timeout=60, what="the ReplicaSet's Pod")


def test_pod_with_claim_template_gets_generated_claim(
    cluster: Cluster, namespace: str, device_class: str
) -> None:
    cluster.apply(template_and_pod_yaml(device_class), namespace)
    pod_uid = cluster.get_json("-n", namespace, "pod", "trainer")["metadata"]["uid"]

    def generated_claims() -> list[Any]:
        items = cluster.get_json("-n", namespace, "resourceclaims")["items"]
        return [c for c in items if POD_CLAIM_NAME_ANNOTATION in annotations_of(c)]

    wait_for(lambda: len(generated_claims()) == 1, timeout=60, what="the generated claim")
    [claim] = generated_claims()
    assert annotations_of(claim)[POD_CLAIM_NAME_ANNOTATION] == "gpu"
    [owner] = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", "trainer", pod_uid)
    assert owner["controller"] is True
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == device_class


def test_stub_webhook_fires(
    cluster: Cluster,
    namespace: str,
    start_webhook: StartWebhook,
    register_webhooks: RegisterWebhooks,
    tmp_path: Path,
) -> None:
    record = tmp_path / "reviews.jsonl"
    stub = [sys.executable, str(STUB_WEBHOOK), "--port", "{port}", "--cert-file", "{cert_file}"]
    stub += ["--key-file", "{key_file}", "--warning", "stub-says", "--record", str(record)]
    server = start_webhook(stub)
    register_webhooks(
        server.url("/validate"), server.url("/mutate"), server.ca_bundle_pem, timeout_seconds=5
    )

    def dry_run_warns() -> bool:
        dry_run = ("create", "--dry-run=server", "-n", namespace, "-f", "-")
        return "stub-says" in cluster.kubectl(*dry_run, input=pod_yaml("probe")).stderr

    wait_until_webhook_fires(dry_run_warns)

    pod = cluster.kubectl("create", "-n", namespace, "-f", "-", input=pod_yaml("real"))
    assert f"Warning: stub-says: CREATE Pod {namespace}/real" in pod.stderr
    claim_yaml = v1beta1_claim_yaml("beta-claim", "gpu.example.com", count=1)
    claim = cluster.kubectl("create", "-n", namespace, "-f", "-", input=claim_yaml)
    assert f"Warning: stub-says: CREATE ResourceClaim {namespace}/beta-claim" in claim.stderr

    reviews = [json.loads(line) for line in record.read_text().splitlines()]
    claim_reviews = [r for r in reviews if r["kind"]["kind"] == "ResourceClaim"]
    assert {r["path"] for r in claim_reviews} == {"/validate", "/mutate"}
    assert all(r["requestKind"]["version"] == "v1beta1" for r in claim_reviews)


def test_helm_reaches_cluster(cluster: Cluster) -> None:
    assert "NAME" in cluster.helm("list", "--all-namespaces").stdout
