"""Benchmark: counting devices matched by DRA selectors over a generated GPU cluster.

Not a test (the tests import `cluster_slices` from here). Run:
`python tests/bench/inventory.py`. Prints, for 1k / 10k / 50k devices: the time to build the
inventory from ResourceSlices, then 10 selectors cold (new cache: compile + evaluate once per
device group) and warm (cached verdicts). Targets at 10k: cold <= 50 ms, warm <= 5 ms.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from webhook.engine.cel import compile_expression
from webhook.engine.inventory import Inventory, SelectorCache

DRIVER = "gpu.nvidia.com"
MODELS = (  # productName, memory, architecture, compute capability
    ("NVIDIA A100-SXM4-40GB", "40Gi", "Ampere", "8.0.0"),
    ("NVIDIA A100-SXM4-80GB", "80Gi", "Ampere", "8.0.0"),
    ("NVIDIA H100 80GB HBM3", "80Gi", "Hopper", "9.0.0"),
)
DRIVER_VERSIONS = ("550.54.15", "570.86.10")
MIG_EVERY = 25
"""Every 25th node has an A100-40GB whose last GPU also publishes 7 MIG 1g.5gb devices."""


def model_of(node: int) -> int:
    return node % len(MODELS)


def driver_version_of(node: int) -> str:
    return DRIVER_VERSIONS[(node // 3) % 2]


def has_mig(node: int) -> bool:
    return node % MIG_EVERY == 0 and model_of(node) == 0


def _gpu(node: int, index: int) -> dict[str, Any]:
    product, memory, architecture, compute = MODELS[model_of(node)]
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{node:05d}-{index}"},
            "productName": {"string": product},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": architecture},
            "cudaComputeCapability": {"version": compute},
            "driverVersion": {"version": driver_version_of(node)},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{index + 16:02x}:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{index // 4:02x}"},
        },
        "capacity": {"memory": {"value": memory}},
    }


def _mig(node: int, placement: int) -> dict[str, Any]:
    return {
        "name": f"gpu-7-mig-1g5gb-19-{placement}",
        "attributes": {
            "type": {"string": "mig"},
            "uuid": {"string": f"MIG-{node:05d}-{placement}"},
            "parentUUID": {"string": f"GPU-{node:05d}-7"},
            "profile": {"string": "1g.5gb"},
            "productName": {"string": MODELS[0][0]},
            "driverVersion": {"version": driver_version_of(node)},
            "resource.kubernetes.io/pciBusID": {"string": "0000:17:00.0"},
        },
        "capacity": {
            "memory": {"value": "4864Mi"},
            "multiprocessors": {"value": "14"},
            f"memorySlice{placement}": {"value": "1"},
        },
    }


def cluster_slices(nodes: int, gpus_per_node: int = 8) -> list[dict[str, Any]]:
    """One v1 ResourceSlice per node, as the NVIDIA DRA driver publishes them."""
    slices = []
    for node in range(nodes):
        devices = [_gpu(node, i) for i in range(gpus_per_node)]
        if has_mig(node):
            devices += [_mig(node, p) for p in range(7)]
        name = f"node-{node:05d}"
        slices.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {
                    "name": f"{name}-{DRIVER}",
                    "uid": f"uid-{node}",
                    "resourceVersion": "1",
                },
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "devices": devices,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                },
            }
        )
    return slices


GPU_CLASS = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"
SELECTORS = (
    GPU_CLASS,
    f"device.attributes['{DRIVER}'].type == 'mig'",
    f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0",
    f"device.capacity['{DRIVER}'].memory.compareTo(quantity('80Gi')) >= 0",
    f"device.attributes['{DRIVER}'].productName.matches('H100')",
    f"device.attributes['{DRIVER}'].productName.startsWith('NVIDIA A100')",
    f"device.attributes['{DRIVER}'].driverVersion.compareTo(semver('560.0.0')) >= 0",
    f"device.attributes['{DRIVER}'].architecture == 'Hopper'",
    f"device.attributes['{DRIVER}'].profile == '1g.5gb'",
    f"'cudaComputeCapability' in device.attributes['{DRIVER}'] && "
    f"device.attributes['{DRIVER}'].cudaComputeCapability.major() >= 9",
)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _timed(work: Callable[[], Any], runs: int = 1) -> tuple[Any, float]:
    started = time.perf_counter()
    for _ in range(runs):
        result = work()
    return result, (time.perf_counter() - started) / runs


def measure(nodes: int) -> dict[str, Any]:
    """Build, 10 selectors cold and warm, a rebuild after one slice changed, a uuid pin."""
    slices = cluster_slices(nodes)
    cache = SelectorCache()
    inventory, built = _timed(lambda: Inventory.from_slices(slices, cache))
    count_all = lambda: [inventory.count_matching([s]) for s in SELECTORS]  # noqa: E731
    cold, cold_time = _timed(count_all)
    warm, warm_time = _timed(count_all, runs=20)
    assert warm == cold
    slices[0] = {**slices[0], "metadata": {**slices[0]["metadata"], "resourceVersion": "2"}}
    inventory, rebuilt = _timed(lambda: Inventory.from_slices(slices, cache))
    again, again_time = _timed(count_all)
    assert again == cold
    pin = f"device.attributes['{DRIVER}'].uuid == 'GPU-00007-3'"
    _, pinned = _timed(lambda: inventory.count_matching([GPU_CLASS, pin]))
    return {
        "devices": inventory.device_count,
        "groups": len(inventory.groups),
        "build_ms": _rounded(built),
        "cold_ms": _rounded(cold_time),
        "warm_ms": _rounded(warm_time),
        "rebuild_ms": _rounded(rebuilt),
        "selectors_after_rebuild_ms": _rounded(again_time),
        "uuid_pin_ms": _rounded(pinned),
    }


def _rounded(seconds: float) -> float:
    return round(seconds * 1000, 2)


def first_compile_ms() -> float:
    """The first CEL compile in a process sets up the parser, once."""
    _, first = _timed(lambda: compile_expression("device.driver == 'x'", variables=["device"]))
    return _rounded(first)


def main() -> None:
    print(f"first CEL compile in this process (parser set-up, once): {first_compile_ms()} ms")
    for nodes in (125, 1250, 6250):
        row = measure(nodes)
        print(
            f"{row['devices']:7d} devices {row['groups']:3d} groups | build "
            f"{row['build_ms']} ms | 10 selectors cold {row['cold_ms']} ms warm "
            f"{row['warm_ms']} ms | one slice changed: rebuild {row['rebuild_ms']} ms + "
            f"selectors {row['selectors_after_rebuild_ms']} ms | uuid pin (per device) "
            f"{row['uuid_pin_ms']} ms"
        )


if __name__ == "__main__":
    main()
