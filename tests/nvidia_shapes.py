"""Devices shaped like NVIDIA's DRA driver publishes them (k8s-dra-driver-gpu, deviceinfo.go).

GPUs: `type: gpu`, productName, brand, architecture, cudaComputeCapability, driverVersion,
cudaDriverVersion (versions as semver), uuid, pcieBusID; capacity `memory` in bytes. MIG
devices: `type: mig`, `profile`, the parent's product attributes, parentUUID; capacities
memory, multiprocessors and `memorySlice<N>`. DeviceClasses as the driver's chart installs them.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

DRIVER = "gpu.nvidia.com"
API = "resource.k8s.io/v1"


@dataclass(frozen=True)
class Gpu:
    product: str
    architecture: str
    compute: str
    memory_mib: int
    driver: str = "550.90.7"
    cuda: str = "12.4"


A100 = Gpu("NVIDIA A100-SXM4-80GB", "Ampere", "8.0", 81920)
A100_40 = Gpu("NVIDIA A100-SXM4-40GB", "Ampere", "8.0", 40960)
H100 = Gpu("NVIDIA H100 80GB HBM3", "Hopper", "9.0", 81559, driver="570.124.6", cuda="12.8")
MIG_PROFILES = {"1g.10gb": (10240, 14), "2g.20gb": (20480, 28), "3g.40gb": (40960, 42)}


def device_classes() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": API,
            "kind": "DeviceClass",
            "metadata": {"name": f"{kind}.nvidia.com"},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": (
                                f"device.driver == '{DRIVER}' && "
                                f"device.attributes['{DRIVER}'].type == '{kind}'"
                            )
                        }
                    }
                ]
            },
        }
        for kind in ("gpu", "mig")
    ]


def _attributes(gpu: Gpu, kind: str, uuid: str) -> dict[str, Any]:
    return {
        "type": {"string": kind},
        "uuid": {"string": uuid},
        "productName": {"string": gpu.product},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": gpu.architecture},
        "cudaComputeCapability": {"version": f"{gpu.compute}.0"},
        "driverVersion": {"version": gpu.driver},
        "cudaDriverVersion": {"version": f"{gpu.cuda}.0"},
        "pcieBusID": {"string": f"0000:{zlib.crc32(uuid.encode()) % 256:02x}:00.0"},
    }


def gpu_devices(node: str, gpu: Gpu, count: int, first: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "name": f"gpu-{i}",
            "attributes": _attributes(gpu, "gpu", f"GPU-{node}-{i}"),
            "capacity": {"memory": {"value": f"{gpu.memory_mib}Mi"}},
        }
        for i in range(first, first + count)
    ]


def mig_devices(
    node: str, gpu: Gpu, parent: int, profile: str, count: int, *, start: int = 0
) -> list[dict[str, Any]]:
    memory, processors = MIG_PROFILES[profile]
    size = int(profile[0])
    found = []
    for n in range(count):
        slot = start + n * size
        attributes = _attributes(gpu, "mig", f"MIG-{node}-{parent}-{profile}-{slot}")
        attributes["profile"] = {"string": profile}
        attributes["parentUUID"] = {"string": f"GPU-{node}-{parent}"}
        capacity: dict[str, Any] = {
            "memory": {"value": f"{memory}Mi"},
            "multiprocessors": {"value": str(processors)},
        }
        capacity.update({f"memorySlice{slot + k}": {"value": "1"} for k in range(size)})
        found.append(
            {
                "name": f"gpu-{parent}-mig-{profile.replace('.', '-')}-{slot}",
                "attributes": attributes,
                "capacity": capacity,
            }
        )
    return found


def resource_slice(node: str, devices: list[dict[str, Any]], slices: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}", "resourceVersion": "1"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": slices},
            "devices": devices,
        },
    }


# --- partitionable GPUs (KEP-4815): a whole GPU and its MIG placements share counters -------

MIG_SLOTS = {"1g.10gb": (1, range(7)), "3g.40gb": (4, (0, 4))}
"""Memory slices each profile takes, and the slots it can start at (A100 80GB: 8 slices)."""


def _consumes(parent: int, memory_mib: int, slots: range) -> list[dict[str, Any]]:
    counters = {"memory": {"value": f"{memory_mib}Mi"}}
    counters.update({f"memory-slice-{k}": {"value": "1"} for k in slots})
    return [{"counterSet": f"gpu-{parent}-counters", "counters": counters}]


def partitioned_gpu(node: str, gpu: Gpu, parent: int) -> list[dict[str, Any]]:
    """The whole GPU and every MIG placement of it, each consuming from the GPU's counters."""
    whole = gpu_devices(node, gpu, 1, first=parent)[0]
    found = [{**whole, "consumesCounters": _consumes(parent, gpu.memory_mib, range(8))}]
    for profile, (size, starts) in MIG_SLOTS.items():
        for start in starts:
            device = mig_devices(node, gpu, parent, profile, 1, start=start)[0]
            device["capacity"] = {
                k: v for k, v in device["capacity"].items() if not k.startswith("memorySlice")
            }
            memory = MIG_PROFILES[profile][0]
            device["consumesCounters"] = _consumes(parent, memory, range(start, start + size))
            found.append(device)
    return found


def partitioned_slices(node: str, gpus: int, gpu: Gpu = A100) -> list[dict[str, Any]]:
    """A pool of two slices, as 1.36+ requires: the counter sets, and the devices."""
    sets = [
        {
            "name": f"gpu-{p}-counters",
            "counters": {
                "memory": {"value": f"{gpu.memory_mib}Mi"},
                **{f"memory-slice-{k}": {"value": "1"} for k in range(8)},
            },
        }
        for p in range(gpus)
    ]
    counters = resource_slice(node, [], slices=2)
    counters["metadata"]["name"] = f"{node}-{DRIVER}-counters"
    del counters["spec"]["devices"]
    counters["spec"]["sharedCounters"] = sets
    devices = [d for p in range(gpus) for d in partitioned_gpu(node, gpu, p)]
    return [counters, resource_slice(node, devices, slices=2)]


def tainted(devices: list[dict[str, Any]], *taints: dict[str, str]) -> list[dict[str, Any]]:
    """The devices with these `taints` (KEP-5055)."""
    return [{**d, "taints": [dict(t) for t in taints]} for d in devices]


def mig_node(node: str, profile: str, gpus: int, per_gpu: int) -> list[dict[str, Any]]:
    return [d for p in range(gpus) for d in mig_devices(node, A100, p, profile, per_gpu)]


def cluster_slices() -> list[dict[str, Any]]:
    """The e2e cluster: two A100 nodes, one H100 node, a mixed node, two MIG nodes."""
    return [
        resource_slice("a100-0", gpu_devices("a100-0", A100, 8)),
        resource_slice("a100-1", gpu_devices("a100-1", A100, 8)),
        resource_slice("h100-0", gpu_devices("h100-0", H100, 8)),
        resource_slice(
            "mixed-0",
            gpu_devices("mixed-0", A100_40, 4) + mig_devices("mixed-0", A100_40, 4, "1g.10gb", 7),
        ),
        resource_slice(
            "mig-0",
            mig_node("mig-0", "1g.10gb", 2, 7) + mig_devices("mig-0", A100, 2, "3g.40gb", 2),
        ),
        resource_slice("mig-big", mig_node("mig-big", "1g.10gb", 8, 7)),
    ]


NODES = ("a100-0", "a100-1", "h100-0", "mixed-0", "mig-0", "mig-big")
