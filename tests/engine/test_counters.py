"""Partitionable devices (KEP-4815): devices chosen for one claim must fit their counter sets.

Node `part` publishes two A100 80GB as a pool of two slices, as 1.36+ requires: one with the
counter sets (per GPU: memory and 8 memory slices), one with the devices: each whole GPU (all
8 slices) and its MIG placements (1g.10gb on one slice at slots 0-6, 3g.40gb on four at 0 and
4). Cases follow the allocator's partitionable-device tests: what fits alone may not fit
together.
"""

from __future__ import annotations

from typing import Any

import pytest
from nvidia_shapes import A100, device_classes, gpu_devices, partitioned_slices, resource_slice

from webhook.engine.counters import pack
from webhook.engine.feasibility import check_claim
from webhook.engine.inventory import Inventory
from webhook.engine.normalize import claim_spec

CLASSES = {c["metadata"]["name"]: c for c in device_classes()}
PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"
ONE_G, THREE_G = PROFILE.format("1g.10gb"), PROFILE.format("3g.40gb")
PARTITIONED = Inventory.from_slices(partitioned_slices("part", 2))
WITH_PLAIN = Inventory.from_slices(
    [*partitioned_slices("part", 2), resource_slice("plain", gpu_devices("plain", A100, 2))]
)


def exact(name: str, cls: str, count: int = 1, *selectors: str, mode: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": f"{cls}.nvidia.com"}
    body.update({"allocationMode": "All"} if mode == "All" else {"count": count})
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": body}


def claim(*requests: dict[str, Any], constraints: Any = ()) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    return {"apiVersion": "resource.k8s.io/v1", "spec": {"devices": devices}}


SAME_GPU = {"matchAttribute": "gpu.nvidia.com/parentUUID"}


@pytest.mark.parametrize(
    ("inventory", "obj", "fits"),
    [
        (PARTITIONED, claim(exact("g", "gpu", 2)), True),
        (PARTITIONED, claim(exact("g", "gpu", 1), exact("m", "mig", 7, ONE_G)), True),
        (PARTITIONED, claim(exact("g", "gpu", 2), exact("m", "mig", 1)), False),
        (PARTITIONED, claim(exact("g", "gpu", 1), exact("m", "mig", 8, ONE_G)), False),
        (PARTITIONED, claim(exact("m", "mig", 14, ONE_G)), True),
        (PARTITIONED, claim(exact("m", "mig", 15, ONE_G)), False),
        (PARTITIONED, claim(exact("b", "mig", 1, THREE_G), exact("s", "mig", 14, ONE_G)), False),
        (PARTITIONED, claim(exact("b", "mig", 3, THREE_G), exact("s", "mig", 4, ONE_G)), True),
        (PARTITIONED, claim(exact("b", "mig", 4, THREE_G), exact("s", "mig", 1, ONE_G)), False),
        (PARTITIONED, claim(exact("m", "mig", mode="All")), False),
        (PARTITIONED, claim(exact("g", "gpu", mode="All")), True),
        (PARTITIONED, claim(exact("g", "gpu", mode="All"), exact("m", "mig", 1)), False),
        (
            PARTITIONED,
            claim(
                exact("b", "mig", 1, THREE_G),
                exact("s", "mig", 5, ONE_G),
                constraints=[{**SAME_GPU, "requests": ["b", "s"]}],
            ),
            False,
        ),
        (
            PARTITIONED,
            claim(
                exact("b", "mig", 1, THREE_G),
                exact("s", "mig", 4, ONE_G),
                constraints=[{**SAME_GPU, "requests": ["b", "s"]}],
            ),
            True,
        ),
        (WITH_PLAIN, claim(exact("g", "gpu", 2), exact("m", "mig", 1)), False),
        (WITH_PLAIN, claim(exact("g", "gpu", 4)), False),
        (WITH_PLAIN, claim(exact("g", "gpu", 2)), True),
    ],
    ids=[
        "two-whole-gpus",
        "gpu-and-7-1g-of-the-other",
        "two-gpus-leave-no-mig",
        "gpu-and-8-1g",
        "14-1g",
        "15-1g",
        "3g-and-14-1g",
        "three-3g-and-four-1g",
        "four-3g-and-a-1g",
        "all-migs-overlap",
        "all-gpus",
        "all-gpus-and-a-mig",
        "3g-and-five-1g-on-one-gpu",
        "3g-and-four-1g-on-one-gpu",
        "other-node-has-no-migs",
        "four-gpus-on-no-node",
        "plain-node-holds-two",
    ],
)
def test_devices_of_one_claim_fit_their_counter_sets(
    inventory: Inventory, obj: dict[str, Any], fits: bool
) -> None:
    results = check_claim(inventory, claim_spec(obj, "c"), CLASSES)
    assert all(r.ok for r in results) is fits, [r.message for r in results]


def test_counter_sets_are_read_from_their_own_slice() -> None:
    counters = PARTITIONED.counters[("gpu.nvidia.com", "part", "gpu-1-counters")]
    assert counters["memory"] == 81920 * 2**20 and counters["memory-slice-7"] == 1
    assert len(PARTITIONED.counters) == 2


@pytest.mark.parametrize(
    ("needed", "whole", "fits"),
    [
        ([(2, [0])], [], True),
        ([(3, [0])], [], False),
        ([(1, [0]), (1, [1])], [], False),
        ([(1, [1])], [0], False),
        ([(2, [0, 1])], [], True),
    ],
    ids=["two-halves", "three-halves", "half-and-whole", "all-halves-and-whole", "either"],
)
def test_pack_searches_the_choices_of_kinds(
    needed: list[tuple[int, list[int]]], whole: list[int], fits: bool
) -> None:
    half = ((0, (("c", 1),)),)
    full = ((0, (("c", 2),)),)
    assert pack(needed, whole, [(half, 2), (full, 1)], ((("c", 2),),)) is fits
