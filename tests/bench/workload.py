"""The objects every benchmark section judges: policies, cluster state and AdmissionReviews.

One realistic GPU Pod (three containers, two of them with GPUs) in two forms: with DRA
template claims (what `/validate` sees) and with legacy `nvidia.com/gpu` limits (what
`/mutate` rewrites). The policy directory is the shipped example set plus 50 generated
tenants and a DeviceClassPolicy with 20 CEL rules; the tenant of the Pod is the last one, so
a scan over tenants would pay for all of them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from engine import RULES
from inventory import cluster_slices

from webhook.policy.loading import default_policy_dir

TENANTS = 50
CEL_RULES = 20
NAMESPACE = f"bench-{TENANTS - 1}"
GPU_PRODUCT = "NVIDIA H100 80GB HBM3"
SELECTOR = f"device.attributes['gpu.nvidia.com'].productName == '{GPU_PRODUCT}'"
POD_UID = "6f1c3d1e-0b7a-4a53-9d65-5a1d5c1f0b01"


def tenant_yaml(index: int) -> str:
    return f"""\
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: bench-{index}}}
spec:
  namespaces: [bench-{index}, bench-{index}-batch]
  allowedDeviceClasses: [gpu.nvidia.com, mig.nvidia.com]
  quota:
  - {{deviceClassName: gpu.nvidia.com, maxDevices: 64, maxDevicesPerClaim: 8}}
  - {{deviceClassName: mig.nvidia.com, maxDevices: 32, maxDevicesPerClaim: 4}}
"""


def rules_yaml(count: int) -> str:
    rules = (RULES * (count // len(RULES) + 1))[:count]
    lines = [
        f"  - {{expression: {json.dumps(r)}, message: 'bench rule {i}', action: Deny}}"
        for i, r in enumerate(rules)
    ]
    return (
        "apiVersion: dragate.io/v1alpha1\nkind: DeviceClassPolicy\n"
        "metadata: {name: bench-rules}\nspec:\n  deviceClassNames: [gpu.nvidia.com]\n"
        "  validations:\n" + "\n".join(lines) + "\n"
    )


def write_policies(directory: Path, tenants: int = TENANTS, rules: int = CEL_RULES) -> Path:
    """The example policies plus `tenants` tenants and `rules` CEL rules, in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    for example in sorted(default_policy_dir().glob("*.yaml")):
        shutil.copy(example, directory / example.name)
    (directory / "bench-tenants.yaml").write_text(
        "---\n".join(tenant_yaml(i) for i in range(tenants))
    )
    (directory / "bench-rules.yaml").write_text(rules_yaml(rules))
    return directory


# ------------------------------------------------------------------------------- objects


def claim_template(name: str, count: int, namespace: str = NAMESPACE) -> dict[str, Any]:
    exactly = {
        "deviceClassName": "gpu.nvidia.com",
        "count": count,
        "selectors": [{"cel": {"expression": SELECTOR}}],
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


DEVICE_CLASSES = (
    device_class(
        "gpu.nvidia.com",
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    ),
    device_class(
        "mig.nvidia.com",
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    ),
)


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta = {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def resource_claim(name: str, namespace_name: str, count: int = 1) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace_name},
        "spec": {"devices": {"requests": [request]}},
    }


def state_objects(nodes: int = 125) -> list[dict[str, Any]]:
    """Namespaces, the Pod's templates, device classes, 10 existing claims, `nodes` x 8 GPUs."""
    objects: list[dict[str, Any]] = [namespace(f"bench-{i}") for i in range(TENANTS)]
    objects += [claim_template("gpu-1", 1), claim_template("gpu-2", 2), *DEVICE_CLASSES]
    objects += [resource_claim(f"existing-{i}", NAMESPACE) for i in range(10)]
    return objects + cluster_slices(nodes)


def write_state(path: Path, nodes: int = 125) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": state_objects(nodes)}))
    return path


def _container(name: str, resources: dict[str, Any], claims: list[str]) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": f"registry.example.com/ml/{name}:2025.06",
        "command": ["python", "-m", name],
        "args": ["--config", "/etc/job/config.yaml"],
        "env": [{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "JOB", "value": name}],
        "ports": [{"containerPort": 8080, "name": "http"}],
        "volumeMounts": [{"name": "config", "mountPath": "/etc/job"}],
        "resources": resources,
    }
    if claims:
        container["resources"] = {**resources, "claims": [{"name": c} for c in claims]}
    return container


BASE_RESOURCES = {"requests": {"cpu": "4", "memory": "32Gi"}, "limits": {"memory": "32Gi"}}


def _pod(containers: list[dict[str, Any]], extra_spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "trainer-0",
            "namespace": NAMESPACE,
            "uid": POD_UID,
            "labels": {"app": "trainer", "team": "ml"},
        },
        "spec": {
            "containers": containers,
            "restartPolicy": "Never",
            "serviceAccountName": "trainer",
            "volumes": [{"name": "config", "configMap": {"name": "trainer-config"}}],
            **extra_spec,
        },
    }


def dra_pod() -> dict[str, Any]:
    """Two GPU containers with their own template claims (1 and 2 GPUs), one sidecar."""
    containers = [
        _container("trainer", BASE_RESOURCES, ["gpu-trainer"]),
        _container("evaluator", BASE_RESOURCES, ["gpu-evaluator"]),
        _container("metrics", {"requests": {"cpu": "100m", "memory": "128Mi"}}, []),
    ]
    claims = [
        {"name": "gpu-trainer", "resourceClaimTemplateName": "gpu-1"},
        {"name": "gpu-evaluator", "resourceClaimTemplateName": "gpu-2"},
    ]
    return _pod(containers, {"resourceClaims": claims})


def legacy_pod() -> dict[str, Any]:
    """The same Pod written for the device plugin: `nvidia.com/gpu` limits, a GFD label."""

    def gpus(count: int) -> dict[str, Any]:
        return {**BASE_RESOURCES, "limits": {**BASE_RESOURCES["limits"], "nvidia.com/gpu": count}}

    containers = [
        _container("trainer", gpus(1), []),
        _container("evaluator", gpus(2), []),
        _container("metrics", {"requests": {"cpu": "100m", "memory": "128Mi"}}, []),
    ]
    selector = {"nodeSelector": {"nvidia.com/gpu.product": GPU_PRODUCT.replace(" ", "-")}}
    return _pod(containers, selector)


def admission_review(obj: dict[str, Any], uid: str = "bench-0001") -> dict[str, Any]:
    """The AdmissionReview the API server sends for a Pod CREATE."""
    gvk = {"group": "", "version": "v1", "kind": "Pod"}
    gvr = {"group": "", "version": "v1", "resource": "pods"}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:ml:deployer",
                "uid": "c0ffee",
                "groups": ["system:serviceaccounts", "system:authenticated"],
            },
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def review_bodies() -> dict[str, bytes]:
    """Endpoint path -> request body."""
    return {
        "/validate": json.dumps(admission_review(dra_pod())).encode(),
        "/mutate": json.dumps(admission_review(legacy_pod())).encode(),
    }
