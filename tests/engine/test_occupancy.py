"""Why a request whose devices exist cannot be allocated now: the Pod's nodes, allocations to
other claims, or a partitionable device's counters used up (KEP-4815)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import pytest

from webhook.engine.devices import Device
from webhook.engine.occupancy import Blockage, Holding, Occupancy, blockage, device_key

DRIVER = "gpu.nvidia.com"
SET = (DRIVER, "part-0", "gpu-0-counters")
COUNTERS = {SET: {"memory": Fraction(8), "slices": Fraction(7)}}


def gpu(name: str, node: str | None = "node-1", **amounts: int) -> Device:
    """A device on `node`; `amounts` it consumes from the one counter set."""
    consumes = ((SET, tuple((k, Fraction(v)) for k, v in amounts.items())),) if amounts else ()
    return Device(f"{node or 'shared'}/{name}", DRIVER, node, {}, {}, consumes=consumes)


WHOLE = gpu("gpu-0", "part-0", memory=8, slices=7)
MIG_A = gpu("gpu-0-mig-0", "part-0", memory=4, slices=3)
MIG_B = gpu("gpu-0-mig-1", "part-0", memory=4, slices=4)
PLAIN = [gpu(f"gpu-{i}") for i in range(5)]
OTHER_NODE = gpu("gpu-0", "node-2")
SHARED = gpu("gpu-9", None)
Allowed = Callable[[str | None], bool]
Held = list[tuple[Device, Holding]]
POD = Holding("ResourceClaim ns/held", ("ns/holder",))
BARE = Holding("ResourceClaim ns/bare")
EVERYWHERE: Allowed = lambda node: True  # noqa: E731
NOT_NODE_1: Allowed = lambda node: node != "node-1"  # noqa: E731

CASES: dict[str, tuple[int, list[Device], Held, Allowed, Blockage | None]] = {
    "free devices block nothing": (2, PLAIN[:2], [], EVERYWHERE, None),
    "a device reachable from every node counts on each": (
        2, [PLAIN[0], SHARED], [], EVERYWHERE, None),
    "every matching node excluded": (1, [PLAIN[0], OTHER_NODE], [], lambda n: False, Blockage(
        "node", "", "request 'gpu': every node with a matching device is excluded "
        "(node-1, node-2)")),
    "an excluded node's free device does not help": (1, [PLAIN[0], OTHER_NODE],
        [(OTHER_NODE, POD)], NOT_NODE_1, Blockage("allocated", "ResourceClaim ns/held",
        "request 'gpu' needs 1, 1 match, 1 allocated: node-2/gpu-0 to ResourceClaim ns/held "
        "(Pod ns/holder)")),
    "allocated to a claim reserved for a Pod": (1, PLAIN[:1], [(PLAIN[0], POD)], EVERYWHERE,
        Blockage("allocated", "ResourceClaim ns/held", "request 'gpu' needs 1, 1 match, "
                 "1 allocated: node-1/gpu-0 to ResourceClaim ns/held (Pod ns/holder)")),
    "allocated to a claim reserved for nothing": (1, PLAIN[:1], [(PLAIN[0], BARE)], EVERYWHERE,
        Blockage("allocated", "ResourceClaim ns/bare", "request 'gpu' needs 1, 1 match, "
                 "1 allocated: node-1/gpu-0 to ResourceClaim ns/bare")),
    "more holders than shown": (1, PLAIN[:4], [(d, BARE) for d in PLAIN[:4]], EVERYWHERE,
        Blockage("allocated", "ResourceClaim ns/bare", "request 'gpu' needs 1, 4 match, "
                 "4 allocated: node-1/gpu-0 to ResourceClaim ns/bare, node-1/gpu-1 to "
                 "ResourceClaim ns/bare, node-1/gpu-2 to ResourceClaim ns/bare (+1 more)")),
    "one free device is not two": (2, PLAIN[:2], [(PLAIN[1], POD)], EVERYWHERE, Blockage(
        "allocated", "ResourceClaim ns/held", "request 'gpu' needs 2, 2 match, 1 allocated: "
        "node-1/gpu-1 to ResourceClaim ns/held (Pod ns/holder)")),
    "the whole GPU after a partition took its counters": (1, [WHOLE], [(MIG_A, POD)], EVERYWHERE,
        Blockage("counters", "ResourceClaim ns/held", "request 'gpu': 1 matching devices "
                 "(part-0/gpu-0) need counters of gpu.nvidia.com/part-0/gpu-0-counters, used "
                 "up by part-0/gpu-0-mig-0 to ResourceClaim ns/held (Pod ns/holder)")),
    "a partition that still fits beside another": (1, [MIG_B], [(MIG_A, POD)], EVERYWHERE, None),
    "a partition after the whole GPU": (1, [MIG_A], [(WHOLE, BARE)], EVERYWHERE, Blockage(
        "counters", "ResourceClaim ns/bare", "request 'gpu': 1 matching devices "
        "(part-0/gpu-0-mig-0) need counters of gpu.nvidia.com/part-0/gpu-0-counters, used up "
        "by part-0/gpu-0 to ResourceClaim ns/bare")),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_blockage_names_what_keeps_matching_devices_from_the_request(case: str) -> None:
    needed, matching, held, allowed, expected = CASES[case]
    devices = {device_key(d): d for d in [*PLAIN, OTHER_NODE, SHARED, WHOLE, MIG_A, MIG_B]}
    occupancy = Occupancy({device_key(d): h for d, h in held}, devices, COUNTERS)
    assert blockage("gpu", needed, matching, occupancy, allowed) == expected


LEFT_CASES = {
    "nothing allocated": ([], {"memory": Fraction(8), "slices": Fraction(7)}),
    "one partition": ([(MIG_A, POD)], {"memory": Fraction(4), "slices": Fraction(4)}),
    "both partitions": ([(MIG_A, POD), (MIG_B, BARE)], dict.fromkeys(COUNTERS[SET], Fraction(0))),
    "a device outside the set": ([(PLAIN[0], POD)], dict(COUNTERS[SET])),
}  # fmt: skip


@pytest.mark.parametrize("case", LEFT_CASES, ids=list(LEFT_CASES))
def test_counters_left_are_the_set_less_what_allocated_devices_consume(case: str) -> None:
    held, left = LEFT_CASES[case]
    devices = {device_key(d): d for d in [PLAIN[0], MIG_A, MIG_B]}
    occupancy = Occupancy({device_key(d): h for d, h in held}, devices, COUNTERS)
    assert occupancy.left() == {SET: left}
    consumers = [d.name for d, _ in occupancy.consumers(SET)]
    assert consumers == [d.name for d, _ in held if d.consumes]
