"""Counting follows Kubernetes ResourceQuota for DRA exactly."""

from __future__ import annotations

import pytest
from builders import claim, exact, first_available, request

from webhook.engine.counting import devices_by_class, holder_key
from webhook.engine.normalize import claim_spec


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        ([request(exact(count=2))], {"gpu.nvidia.com": 2}),
        ([request(exact(count=None, mode="All"))], {"gpu.nvidia.com": 32}),
        ([request(exact(count=1, admin=True))], {"gpu.nvidia.com": 1}),
        (
            [request(exact("a", count=2)), request(exact("b", count=3))],
            {"gpu.nvidia.com": 5},
        ),
        (
            [first_available("x", exact("big", count=4), exact("small", count=1))],
            {"gpu.nvidia.com": 4},
        ),
        (
            [first_available("x", exact("g", count=2), exact("m", "mig.nvidia.com", count=3))],
            {"gpu.nvidia.com": 2, "mig.nvidia.com": 3},
        ),
    ],
    ids=[
        "exact",
        "all-is-32",
        "admin-counts",
        "sum",
        "first-available-max",
        "first-available-per-class",
    ],
)
def test_devices_by_class(requests: list[dict[str, object]], expected: dict[str, int]) -> None:
    assert devices_by_class(claim_spec(claim(*requests), "c")) == expected


def test_generated_claim_is_keyed_like_the_pods_reservation() -> None:
    generated = claim(request(exact()), name="")
    generated["metadata"] = {
        "generateName": "train-gpu-",
        "namespace": "team-a",
        "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
        "ownerReferences": [{"kind": "Pod", "name": "train", "uid": "u-1", "controller": True}],
    }
    assert holder_key(generated) == "pod:u-1/gpu"
    assert holder_key(claim(request(exact()), name="c1")) == "claim:team-a/c1"
