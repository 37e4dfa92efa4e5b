"""The device inventory is rebuilt only when the published slices change, and looked at again
only after `recheck_seconds` (a fake clock: no timing)."""

from __future__ import annotations

from typing import Any

from webhook.kube.inventorysource import InventorySource


def gpu_slice(version: str, generation: int = 1) -> dict[str, Any]:
    return {
        "kind": "ResourceSlice",
        "metadata": {"name": "node-a-gpu", "resourceVersion": version},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": generation, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {}}],
        },
    }


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_no_slices_no_inventory() -> None:
    assert InventorySource(list).current() is None


def test_rebuilt_only_when_a_slice_changes_and_after_the_recheck_interval() -> None:
    published = [gpu_slice("1")]
    clock = Clock()
    source = InventorySource(lambda: published, recheck_seconds=5.0, clock=clock)
    first = source.current()
    assert first is not None
    published = [gpu_slice("2")]
    assert source.current() is first  # not looked at again before the interval
    clock.now = 5.0
    second = source.current()
    assert second is not None and second is not first
    clock.now = 10.0
    assert source.current() is second  # looked again, nothing changed
