"""The inputs of `test_scheduler.py`: random DRA claims and the table of legacy Pods."""

from __future__ import annotations

import random
from typing import Any

from .scheduling import BOUND, UNSCHEDULABLE

CLASSES = ("gpu.nvidia.com", "mig.nvidia.com")
PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"
PRODUCT = "device.attributes['gpu.nvidia.com'].productName == '{}'"
MEMORY = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{}')) >= 0"


# --- random claims ---------------------------------------------------------------------------


def random_leaf(
    rng: random.Random, name: str, *, all_ok: bool = True, capacity: bool = False
) -> dict[str, Any]:
    cls = rng.choice(CLASSES)
    body: dict[str, Any] = {"deviceClassName": cls}
    if capacity and rng.random() < 0.3:  # consumable capacity (KEP-5075): beta, on in 1.36+
        body["capacity"] = {"requests": {"memory": rng.choice(("10Gi", "40Gi"))}}
    if all_ok and rng.random() < 0.2:
        body["allocationMode"] = "All"
    else:
        body["count"] = rng.choice((1, 1, 2, 3, 4, 5, 7, 8, 9))
    selectors = []
    if cls == "mig.nvidia.com" and rng.random() < 0.7:
        selectors.append(PROFILE.format(rng.choice(("1g.10gb", "3g.40gb", "2g.20gb"))))
    if cls == "gpu.nvidia.com" and rng.random() < 0.5:
        selectors.append(
            rng.choice(
                (
                    PRODUCT.format("NVIDIA H100 80GB HBM3"),
                    PRODUCT.format("NVIDIA A100-SXM4-80GB"),
                    MEMORY.format("80Gi"),
                    MEMORY.format("40Gi"),
                    "device.attributes['gpu.nvidia.com'].driverVersion.major() == 570",
                )
            )
        )
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, **body}


def random_request(
    rng: random.Random, name: str, admin: bool, capacity: bool = False
) -> dict[str, Any]:
    """A v1-shaped request: `exactly` or `firstAvailable` (2-3 alternatives), with capacity
    requests when asked (quota only: feasibility does not model shared capacity)."""
    if rng.random() < 0.3:
        subs = [random_leaf(rng, f"alt{i}", capacity=capacity) for i in range(rng.randint(2, 3))]
        return {"name": name, "firstAvailable": subs}
    leaf = random_leaf(rng, name, capacity=capacity)
    if admin and rng.random() < 0.3:
        leaf["adminAccess"] = True
    return {"name": leaf.pop("name"), "exactly": leaf}


def in_version(claim_spec_v1: dict[str, Any], version: str) -> dict[str, Any]:
    """The same spec in v1 (`exactly`), v1beta2 (same shape) or v1beta1 (flat requests)."""
    if version != "v1beta1":
        return claim_spec_v1
    requests = []
    for request in claim_spec_v1["devices"]["requests"]:
        exact = request.get("exactly")
        requests.append({"name": request["name"], **exact} if exact else request)
    return {"devices": {**claim_spec_v1["devices"], "requests": requests}}


def random_claim(
    rng: random.Random, name: str, ns: str, *, admin: bool, capacity: bool = False
) -> dict[str, Any]:
    requests = [random_request(rng, f"r{i}", admin, capacity) for i in range(rng.randint(1, 3))]
    version = rng.choice(("v1", "v1beta2", "v1beta1"))
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": in_version({"devices": {"requests": requests}}, version),
    }


def quota_key(device_class: str) -> str:
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


# --- the legacy table ------------------------------------------------------------------------

POLICIES = """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: legacy}
spec:
  namespaces: [legacy, migrated]
  quota:
  - {deviceClassName: gpu.nvidia.com, maxDevices: 1000}
  - {deviceClassName: mig.nvidia.com, maxDevices: 1000}
---
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: charge}
spec:
  namespaces: [charge-dragate]
  quota:
  - {deviceClassName: gpu.nvidia.com, maxDevices: 4}
---
apiVersion: dragate.io/v1alpha1
kind: DeviceClassPolicy
metadata: {name: gpu}
spec: {deviceClassNames: [gpu.nvidia.com], maxCountPerRequest: 8}
---
apiVersion: dragate.io/v1alpha1
kind: DeviceClassPolicy
metadata: {name: mig}
spec: {deviceClassNames: [mig.nvidia.com], maxCountPerRequest: 7}
---
apiVersion: dragate.io/v1alpha1
kind: Settings
metadata: {name: settings}
spec: {feasibility: Warn}
"""

DENIED = "denied"


def container(name: str, **limits: int) -> dict[str, Any]:
    legacy = {f"nvidia.com/{k.replace('_', '.')}": v for k, v in limits.items()}
    return {"name": name, "image": "x", "resources": {"limits": legacy}}


def sidecar(name: str, **limits: int) -> dict[str, Any]:
    return {**container(name, **limits), "restartPolicy": "Always"}


def mig(profile: str, count: int) -> dict[str, int]:
    return {f"mig-{profile}".replace(".", "_"): count}


Row = tuple[str, list[dict[str, Any]], list[dict[str, Any]], dict[str, str], str]
"""(id, containers, init containers, node selector, expected outcome)"""
TABLE: list[Row] = [
    ("gpu-1", [container("m", gpu=1)], [], {}, BOUND),
    ("gpu-8", [container("m", gpu=8)], [], {}, BOUND),
    ("gpu-9", [container("m", gpu=9)], [], {}, DENIED),
    ("two-containers", [container("a", gpu=1), container("b", gpu=2)], [], {}, BOUND),
    (
        "h100-product",
        [container("m", gpu=4)],
        [],
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        BOUND,
    ),
    (
        "a100-80-product-8",
        [container("m", gpu=8)],
        [],
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        BOUND,
    ),
    (
        "a100-40-product-5",
        [container("m", gpu=5)],
        [],
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
        UNSCHEDULABLE,
    ),
    ("memory-80g", [container("m", gpu=2)], [], {"nvidia.com/gpu.memory": "81920"}, BOUND),
    ("memory-40g-4", [container("m", gpu=4)], [], {"nvidia.com/gpu.memory": "40960"}, BOUND),
    ("family-hopper", [container("m", gpu=1)], [], {"nvidia.com/gpu.family": "hopper"}, BOUND),
    ("family-ampere-8", [container("m", gpu=8)], [], {"nvidia.com/gpu.family": "ampere"}, BOUND),
    (
        "family-volta",
        [container("m", gpu=1)],
        [],
        {"nvidia.com/gpu.family": "volta"},
        UNSCHEDULABLE,
    ),
    ("driver-570", [container("m", gpu=1)], [], {"nvidia.com/cuda.driver.major": "570"}, BOUND),
    (
        "driver-version-550-8",
        [container("m", gpu=8)],
        [],
        {"nvidia.com/cuda.driver-version.major": "550"},
        BOUND,
    ),
    (
        "driver-535",
        [container("m", gpu=1)],
        [],
        {"nvidia.com/cuda.driver.major": "535"},
        UNSCHEDULABLE,
    ),
    (
        "cuda-12.8",
        [container("m", gpu=1)],
        [],
        {"nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "8"},
        BOUND,
    ),
    ("compute-9", [container("m", gpu=2)], [], {"nvidia.com/gpu.compute.major": "9"}, BOUND),
    (
        "compute-7",
        [container("m", gpu=1)],
        [],
        {"nvidia.com/gpu.compute.major": "7"},
        UNSCHEDULABLE,
    ),
    ("mig-1g-1", [container("m", **mig("1g.10gb", 1))], [], {}, BOUND),
    ("mig-1g-7", [container("m", **mig("1g.10gb", 7))], [], {}, BOUND),
    ("mig-1g-8", [container("m", **mig("1g.10gb", 8))], [], {}, DENIED),
    ("mig-3g-2", [container("m", **mig("3g.40gb", 2))], [], {}, BOUND),
    ("mig-3g-3", [container("m", **mig("3g.40gb", 3))], [], {}, UNSCHEDULABLE),
    ("mig-2g-none", [container("m", **mig("2g.20gb", 1))], [], {}, UNSCHEDULABLE),
    ("init-8-main-8", [container("m", gpu=8)], [container("i", gpu=8)], {}, BOUND),
    (
        "init-8-mains-2-2",
        [container("a", gpu=2), container("b", gpu=2)],
        [container("i", gpu=8)],
        {},
        BOUND,
    ),
    (
        "sidecar-1-init-7-main-7",
        [container("m", gpu=7)],
        [sidecar("s", gpu=1), container("i", gpu=7)],
        {},
        BOUND,
    ),
    # the sidecar runs beside the init container: 2 + 7 = 9 GPUs, with the device plugin too
    (
        "sidecar-2-init-7-main-6",
        [container("m", gpu=6)],
        [sidecar("s", gpu=2), container("i", gpu=7)],
        {},
        UNSCHEDULABLE,
    ),
    (
        "init-7-then-sidecar-2-main-6",
        [container("m", gpu=6)],
        [container("i", gpu=7), sidecar("s", gpu=2)],
        {},
        BOUND,
    ),
    ("gpu-2-and-mig-one-container", [container("m", gpu=2, **mig("1g.10gb", 1))], [], {}, BOUND),
    (
        "gpu-5-and-mig-one-container",
        [container("m", gpu=5, **mig("1g.10gb", 1))],
        [],
        {},
        UNSCHEDULABLE,
    ),
    (
        "h100-9",
        [container("m", gpu=9)],
        [],
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        DENIED,
    ),
]


def legacy_pod(
    name: str,
    ns: str,
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]],
    selector: dict[str, str],
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = init
    if selector:
        spec["nodeSelector"] = selector
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }
