"""Feasibility checks a claim's requests together on one node, as the scheduler allocates."""

from __future__ import annotations

from typing import Any

import pytest
from nvidia_shapes import (
    A100,
    H100,
    cluster_slices,
    device_classes,
    gpu_devices,
    resource_slice,
    tainted,
)

from webhook.engine.feasibility import check_claim
from webhook.engine.inventory import Inventory
from webhook.engine.normalize import claim_spec

CLASSES = {c["metadata"]["name"]: c for c in device_classes()}
H100_ONLY = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"


def exact(
    name: str, cls: str = "gpu", count: int = 1, *selectors: str, mode: str = "ExactCount"
) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": f"{cls}.nvidia.com", "allocationMode": mode}
    if mode == "ExactCount":
        body["count"] = count
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": body}


def spec(*requests: dict[str, Any], constraints: Any = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {"devices": devices},
    }


INVENTORY = Inventory.from_slices(cluster_slices())
MIXED = Inventory.from_slices(
    [
        resource_slice("n1", gpu_devices("n1", A100, 1) + gpu_devices("n1", H100, 1, first=1)),
    ]
)
_BAD = gpu_devices("bad", A100, 8)
_BAD[0] = {**_BAD[0], "attributes": {**_BAD[0]["attributes"], "note": {"int": 1}}}
BROKEN = Inventory.from_slices(
    [
        resource_slice("ok", gpu_devices("ok", A100, 2)),
        resource_slice("bad", _BAD),
    ]
)
ERRS_ON_NOTE = (
    "!has(device.attributes['gpu.nvidia.com'].note) || "
    "device.attributes['gpu.nvidia.com'].note / 0 == 1"
)


@pytest.mark.parametrize(
    ("inventory", "claim", "fits"),
    [
        (INVENTORY, spec(exact("a", count=8), exact("b", count=1)), False),
        (INVENTORY, spec(exact("a", count=4), exact("b", count=4)), True),
        (INVENTORY, spec(exact("a", "gpu", 4, H100_ONLY), exact("b", "gpu", 5, H100_ONLY)), False),
        (
            INVENTORY,
            spec(exact("g", "gpu", 1), exact("m", "mig", 1, PROFILE.format("1g.10gb"))),
            True,
        ),
        (INVENTORY, spec(exact("g", "gpu", 5), exact("m", "mig", 1)), False),
        (INVENTORY, spec(exact("m", "mig", 1, PROFILE.format("1g.10gb"), mode="All")), False),
        (INVENTORY, spec(exact("m", "mig", 1, PROFILE.format("3g.40gb"), mode="All")), True),
        (Inventory.from_slices(cluster_slices()[-1:]), spec(exact("m", "mig", mode="All")), False),
        (
            MIXED,
            spec(
                exact("a"),
                exact("b"),
                constraints=[
                    {"requests": ["a", "b"], "matchAttribute": "gpu.nvidia.com/productName"}
                ],
            ),
            False,
        ),
        (
            INVENTORY,
            spec(
                exact("a"),
                exact("b"),
                constraints=[{"matchAttribute": "gpu.nvidia.com/productName"}],
            ),
            True,
        ),
        (BROKEN, spec(exact("a", "gpu", 4, ERRS_ON_NOTE)), False),
        (BROKEN, spec(exact("a", "gpu", 2, ERRS_ON_NOTE)), False),
        (BROKEN, spec(exact("a", "gpu", 2)), True),
    ],
    ids=[
        "8+1-on-8-gpu-nodes",
        "4+4",
        "4+5-h100",
        "gpu+mig-mixed-node",
        "5-gpu+mig",
        "all-1g-56-on-one-node-aborts",
        "all-3g",
        "all-56-migs-over-32",
        "match-attribute-fails",
        "match-attribute-holds",
        "cel-error-aborts",
        "cel-error-aborts-even-where-it-fits",
        "no-error-fits",
    ],
)
def test_requests_of_one_claim_are_placed_together(
    inventory: Inventory, claim: dict[str, Any], fits: bool
) -> None:
    results = check_claim(inventory, claim_spec(claim, "the claim"), CLASSES)
    assert all(r.ok for r in results) is fits, [r.message for r in results]


# --- device taints (KEP-5055) -----------------------------------------------------------------

ECC = {"key": "gpu.nvidia.com/ecc", "value": "bad", "effect": "NoSchedule"}
TAINTED = Inventory.from_slices(
    [
        resource_slice(
            "t",
            tainted(gpu_devices("t", A100, 2), ECC)
            + gpu_devices("t", A100, 2, first=2)
            + tainted(gpu_devices("t", A100, 1, first=4), {**ECC, "effect": "None"}),
        )
    ]
)
DRAINING = Inventory.from_slices(
    [
        resource_slice(
            "d", tainted(gpu_devices("d", H100, 2), {"key": "drain", "effect": "NoExecute"})
        )
    ]
)


def tolerating(request: dict[str, Any], *tolerations: dict[str, str]) -> dict[str, Any]:
    body = request.get("exactly", request)
    body["tolerations"] = list(tolerations)
    return request


def sub(name: str, count: int, *tolerations: dict[str, str]) -> dict[str, Any]:
    return {"name": name, **tolerating(exact(name, "gpu", count)["exactly"], *tolerations)}


@pytest.mark.parametrize(
    ("inventory", "claim", "fits"),
    [
        (TAINTED, spec(exact("a", count=3)), True),
        (TAINTED, spec(exact("a", count=4)), False),
        (
            TAINTED,
            spec(tolerating(exact("a", count=5), {"key": ECC["key"], "operator": "Exists"})),
            True,
        ),
        (TAINTED, spec(tolerating(exact("a", count=5), ECC)), True),
        (TAINTED, spec(tolerating(exact("a", count=5), {**ECC, "value": "good"})), False),
        (TAINTED, spec(tolerating(exact("a", count=5), {**ECC, "effect": "NoExecute"})), False),
        (TAINTED, spec(tolerating(exact("a", count=5), {"operator": "Exists"})), True),
        (TAINTED, spec(exact("a", mode="All")), False),
        (TAINTED, spec(tolerating(exact("a", mode="All"), ECC)), True),
        (TAINTED, spec(exact("a", count=3), tolerating(exact("b", count=2), ECC)), True),
        (TAINTED, spec(exact("a", count=4), tolerating(exact("b", count=1), ECC)), False),
        (TAINTED, spec({"name": "g", "firstAvailable": [sub("x", 5), sub("y", 5, ECC)]}), True),
        (TAINTED, spec({"name": "g", "firstAvailable": [sub("x", 4), sub("y", 4)]}), False),
        (DRAINING, spec(exact("a")), False),
        (
            DRAINING,
            spec(tolerating(exact("a", count=2), {"key": "drain", "operator": "Exists"})),
            True,
        ),
    ],
    ids=[
        "untainted-and-none-effect",
        "tainted-not-tolerated",
        "exists",
        "equal",
        "other-value",
        "other-effect",
        "every-taint",
        "all-meets-a-taint",
        "all-tolerating",
        "one-request-tolerates",
        "the-other-does-not",
        "subrequest-tolerates",
        "no-subrequest-tolerates",
        "noexecute",
        "noexecute-tolerated",
    ],
)
def test_untolerated_taints_keep_devices_from_a_request(
    inventory: Inventory, claim: dict[str, Any], fits: bool
) -> None:
    results = check_claim(inventory, claim_spec(claim, "the claim"), CLASSES)
    assert all(r.ok for r in results) is fits, [r.message for r in results]


def test_the_message_names_the_taints_not_tolerated() -> None:
    (result,) = check_claim(TAINTED, claim_spec(spec(exact("a", count=4)), "c"), CLASSES)
    assert "2 more match but have taints the request does not tolerate" in result.message
    assert "gpu.nvidia.com/ecc=bad:NoSchedule" in result.message
