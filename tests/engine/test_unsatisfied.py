"""`unsatisfied`, remembered by the inventory, says what `check_claim` says on a fresh one.

Every answer is compared with `check_claim` on an inventory built anew from the same slices (so
nothing remembered can help it): for each claim shape, again after other shapes were asked,
after the DeviceClasses changed, and on a rebuilt inventory.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from nvidia_shapes import A100, H100, cluster_slices, device_classes, gpu_devices, resource_slice

from webhook.engine import inventory as inventory_module
from webhook.engine.feasibility import binding_notes, check_claim, unsatisfied
from webhook.engine.inventory import Inventory
from webhook.engine.normalize import claim_spec
from webhook.types import ClaimSpec, Object

CLASSES = {c["metadata"]["name"]: c for c in device_classes()}
H100_ONLY = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
B200_ONLY = "device.attributes['gpu.nvidia.com'].productName == 'B200'"
Slices = Callable[[], list[Object]]


def _request(name: str, cls: str = "gpu", count: int = 1, *selectors: str) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": f"{cls}.nvidia.com", "count": count}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": body}


def _sub(name: str, cls: str = "gpu", *selectors: str) -> dict[str, Any]:
    """A `firstAvailable` subrequest: its fields are not wrapped in `exactly`."""
    return {"name": name, **_request(name, cls, 1, *selectors)["exactly"]}


def _spec(*requests: dict[str, Any], label: str = "pod claim 'c'", **devices: Any) -> ClaimSpec:
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "spec": {"devices": {"requests": list(requests), **devices}},
    }
    return claim_spec(obj, label)


SPECS = {
    "fits": _spec(_request("a", count=2)),
    "no-such-model": _spec(_request("a", "gpu", 1, B200_ONLY)),
    "nine-on-one-node": _spec(_request("a", count=9)),
    "unknown-class": _spec(_request("a", "tpu")),
    "one-of-two": _spec(_request("a"), _request("b", "gpu", 1, B200_ONLY)),
    "not-together": _spec(_request("a", "gpu", 4, H100_ONLY), _request("b", "gpu", 5, H100_ONLY)),
    "first-available": _spec(
        {"name": "g", "firstAvailable": [_sub("x", "gpu", B200_ONLY), _sub("y")]}
    ),
    "no-alternative": _spec(
        {"name": "g", "firstAvailable": [_sub("x", "gpu", B200_ONLY), _sub("y", "tpu")]}
    ),
    "constrained": _spec(
        _request("a"),
        _request("b"),
        constraints=[{"matchAttribute": "gpu.nvidia.com/productName"}],
    ),
    "other-label": _spec(_request("a", count=9), label="pod claim 'other'"),
    "no-requests": _spec(),
}
SLICES: dict[str, Slices] = {
    "cluster": cluster_slices,
    "mixed-node": lambda: [
        resource_slice("n1", gpu_devices("n1", A100, 1) + gpu_devices("n1", H100, 1, first=1))
    ],
}


def _uncached(slices: Slices, spec: ClaimSpec, classes: Mapping[str, Object]) -> tuple[str, ...]:
    fresh = Inventory.from_slices(slices())
    return tuple(r.message for r in check_claim(fresh, spec, classes) if not r.ok)


@pytest.mark.parametrize("slices", SLICES, ids=list(SLICES))
def test_every_shape_asked_twice_in_any_order(slices: str) -> None:
    inventory = Inventory.from_slices(SLICES[slices]())
    expected = {name: _uncached(SLICES[slices], s, CLASSES) for name, s in SPECS.items()}
    for name in itertools.chain(SPECS, reversed(list(SPECS))):
        assert unsatisfied(inventory, SPECS[name], CLASSES) == expected[name], name


def _with_selector(name: str, expression: str) -> dict[str, Object]:
    changed = {**CLASSES[name], "spec": {"selectors": [{"cel": {"expression": expression}}]}}
    return {**CLASSES, name: changed}


CHANGED_CLASSES = {
    "gpu-class-narrowed": _with_selector("gpu.nvidia.com", H100_ONLY),
    "gpu-class-emptied": _with_selector("gpu.nvidia.com", B200_ONLY),
    "gpu-class-gone": {k: v for k, v in CLASSES.items() if k != "gpu.nvidia.com"},
    "tpu-class-added": {**CLASSES, "tpu.nvidia.com": CLASSES["gpu.nvidia.com"]},
}


@pytest.mark.parametrize("classes", CHANGED_CLASSES, ids=list(CHANGED_CLASSES))
def test_changed_device_classes_miss(classes: str) -> None:
    inventory = Inventory.from_slices(cluster_slices())
    changed = CHANGED_CLASSES[classes]
    for spec in SPECS.values():
        unsatisfied(inventory, spec, CLASSES)
        assert unsatisfied(inventory, spec, changed) == _uncached(cluster_slices, spec, changed)
        assert unsatisfied(inventory, spec, CLASSES) == _uncached(cluster_slices, spec, CLASSES)


def test_a_rebuilt_inventory_answers_for_its_own_devices() -> None:
    spec = _spec(_request("a", count=4))
    before = Inventory.from_slices(cluster_slices())
    assert unsatisfied(before, spec, CLASSES) == ()  # a node has eight GPUs; the other two
    small = SLICES["mixed-node"]
    assert unsatisfied(Inventory.from_slices(small()), spec, CLASSES) == _uncached(
        small, spec, CLASSES
    )
    assert unsatisfied(Inventory.from_slices(small()), spec, CLASSES) != ()


def test_what_an_inventory_remembers_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inventory_module, "MAX_CACHED_SELECTIONS", 3)
    inventory = Inventory.from_slices(cluster_slices())
    for count in range(1, 20):
        spec = _spec(_request("a", count=count))
        assert unsatisfied(inventory, spec, CLASSES) == _uncached(cluster_slices, spec, CLASSES)
        assert len(inventory._remembered) <= 3


# --- binding conditions (KEP-5007) ------------------------------------------------------------

WAITS_FOR = {"bindingConditions": ["dra.example.com/attached"], "bindingFailureConditions": ["x"]}
_ATTACHED = [{**d, **WAITS_FOR} for d in gpu_devices("fabric", H100, 2)]
BINDING = [
    resource_slice("fabric", _ATTACHED),
    resource_slice("plain", gpu_devices("plain", A100, 2)),
]


@pytest.mark.parametrize(
    ("obj", "notes"),
    [
        (
            _request("a", "gpu", 1, H100_ONLY),
            ["request 'a': the Pod binds only once the driver reports"],
        ),
        (_request("a"), []),  # the scheduler may take a device without binding conditions
        (
            _request(
                "a",
                "gpu",
                1,
                "device.attributes['gpu.nvidia.com'].productName != 'NVIDIA H100 80GB HBM3'",
            ),
            [],
        ),
    ],
    ids=["only-waiting-devices", "some-waiting-devices", "none"],
)
def test_binding_conditions_are_a_note_not_a_failure(obj: dict[str, Any], notes: list[str]) -> None:
    inventory = Inventory.from_slices(BINDING)
    spec = _spec(obj)
    assert all(r.ok for r in check_claim(inventory, spec, CLASSES))
    found = binding_notes(inventory, spec, CLASSES)
    assert len(found) == len(notes)
    for text, expected in zip(found, notes, strict=True):
        assert text.startswith(expected) and "dra.example.com/attached" in text


def _pool(node: str, pool: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    found = resource_slice(node, devices)
    found["metadata"] = {"name": pool}
    found["spec"]["pool"]["name"] = pool
    return found


ON_MIXED = "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-mixed')"
MIXED = [
    *BINDING,
    _pool("mixed", "mixed", gpu_devices("mixed", A100, 1)),
    _pool(
        "mixed",
        "mixed-wait",
        [{**d, **WAITS_FOR} for d in gpu_devices("mixed", A100, 2, first=1)],
    ),
]


@pytest.mark.parametrize(
    ("obj", "waits"),
    [
        (_request("a", "gpu", 1, ON_MIXED), False),
        (_request("a", "gpu", 2, ON_MIXED), True),
        (
            {
                "name": "a",
                "exactly": {
                    "deviceClassName": "gpu.nvidia.com",
                    "allocationMode": "All",
                    "selectors": [{"cel": {"expression": ON_MIXED}}],
                },
            },
            True,
        ),
        (_request("a", "gpu", 2), False),
        (_request("a", "gpu", 3), True),
        (
            {
                "name": "a",
                "firstAvailable": [_sub("x", "gpu", ON_MIXED), _sub("y", "gpu", H100_ONLY)],
            },
            False,
        ),
        (
            {
                "name": "a",
                "firstAvailable": [_sub("x", "gpu", H100_ONLY), _sub("y", "gpu", ON_MIXED)],
            },
            True,
        ),
        (
            {
                "name": "a",
                "firstAvailable": [_sub("x", "gpu", B200_ONLY), _sub("y", "gpu", H100_ONLY)],
            },
            True,
        ),
    ],
    ids=[
        "plain-device-enough",
        "plain-devices-too-few",
        "all-takes-waiting-ones",
        "plain-node-enough",
        "no-node-has-enough-plain",
        "first-alternative-plain",
        "first-alternative-waits",
        "first-alternative-unmet",
    ],
)
def test_a_request_no_node_meets_without_waiting_devices_is_noted(
    obj: dict[str, Any], waits: bool
) -> None:
    """The allocator tries devices without binding conditions first (their pools go first), so
    the Pod waits for sure only when no node can meet the request without waiting devices."""
    inventory = Inventory.from_slices(MIXED)
    spec = _spec(obj)
    assert all(r.ok for r in check_claim(inventory, spec, CLASSES))
    assert bool(binding_notes(inventory, spec, CLASSES)) is waits
