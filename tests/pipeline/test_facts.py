"""Gathered facts: what the published devices say is the same object while nothing changed.

The engine remembers a Pod's judgment while the facts it read are the very same objects
(engine/podshapes.py), so `gather` must hand out the same feasibility and class capacity for
the same inventory and equal DeviceClasses, and new ones when either changes.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from builders import claim, exact, namespace, pod, request

from webhook.engine.inventory import Inventory
from webhook.engine.normalize import claim_spec
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context, request_from_object
from webhook.pipeline.facts import NOTHING_PUBLISHED, gather
from webhook.types import Facts, Object, PolicySet


def _gpu_class(expression: str = "true") -> Object:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _slice(devices: int) -> Object:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-a-gpu"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(devices)],
        },
    }


INVENTORY = Inventory.from_slices([_slice(2)])
POLICIES = PolicySet()


def _facts(state: SnapshotState, inventory: Inventory | None) -> Facts:
    context = Context(
        policies=lambda: POLICIES,
        state=state,
        ledger=MemoryLedger(),
        inventory=(lambda: inventory) if inventory is not None else None,
    )
    return gather(request_from_object(pod(claims={"gpu": "t"})), POLICIES, context)


def _published(facts: Facts) -> tuple[Any, Any, Any]:
    return facts.class_capacity, facts.feasibility, facts.binding


CHANGES = [  # id, (state, inventory) for the second review, whether it publishes the same
    ("nothing changed", lambda s: (s, INVENTORY), True),
    ("an equal DeviceClass, another object", lambda s: (_state(_gpu_class()), INVENTORY), True),
    ("a changed DeviceClass", lambda s: (_state(_gpu_class("false")), INVENTORY), False),
    ("a new inventory", lambda s: (s, Inventory.from_slices([_slice(3)])), False),
]


def _state(*objects: Object) -> SnapshotState:
    return SnapshotState([namespace("team-a"), *copy.deepcopy(list(objects))])


@pytest.mark.parametrize(("change", "same"), [c[1:] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_the_published_facts_are_the_same_objects_while_nothing_changed(
    change: Any, same: bool
) -> None:
    state = _state(_gpu_class())
    first = _published(_facts(state, INVENTORY))
    second = _published(_facts(*change(state)))
    assert all(s is f for s, f in zip(second, first, strict=True)) is same
    if not same:
        assert all(s is not f for s, f in zip(second, first, strict=True))


def test_without_an_inventory_every_review_gets_the_same_nothing() -> None:
    state = _state(_gpu_class())
    assert _published(_facts(state, None)) == NOTHING_PUBLISHED
    assert _facts(state, None).class_capacity is _facts(state, None).class_capacity


def _waiting(devices: int) -> Object:
    """`_slice` whose devices bind only once the driver reports a condition."""
    found = copy.deepcopy(_slice(devices))
    for device in found["spec"]["devices"]:
        device["bindingConditions"] = ["dra.example.com/attached"]
    return found


def _on_node_b(devices: int) -> Object:
    found = copy.deepcopy(_slice(devices))
    found["metadata"]["name"] = "node-b-gpu"
    found["spec"].update(nodeName="node-b", pool={**found["spec"]["pool"], "name": "node-b"})
    return found


@pytest.mark.parametrize(
    ("slices", "waits"),
    [([_waiting(2)], True), ([_slice(2)], False), ([_waiting(2), _on_node_b(1)], False)],
    ids=["only-waiting-devices", "no-waiting-device", "a-device-that-does-not-wait"],
)
def test_requests_only_waiting_devices_meet_are_published(
    slices: list[Object], waits: bool
) -> None:
    facts = _facts(_state(_gpu_class()), Inventory.from_slices(slices))
    spec = claim_spec(claim(request(exact())), "claim")
    assert facts.binding is not None
    assert bool(facts.binding(spec)) is waits
