"""PodGroups as gangs: minCount Pods of the owner's shape, the group's claims once."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.engine.gangs import DEFAULT_GANG_KINDS, gang_target, is_gang
from webhook.engine.podgroups import owner_of, podgroup_demand, shared_names

GPU = "gpu.nvidia.com"
CHARGES = {"two": {GPU: 2}, "one": {GPU: 1}, "four": {GPU: 4}}


def charges_of(pod_spec: dict[str, Any]) -> dict[str, int]:
    total: dict[str, int] = {}
    for claim in pod_spec.get("resourceClaims") or []:
        for device_class, n in CHARGES.get(claim.get("resourceClaimTemplateName"), {}).items():
            total[device_class] = total.get(device_class, 0) + n
    return total


def podgroup(
    min_count: int | None = 4, claims: list[dict[str, Any]] | None = None, **meta: Any
) -> dict[str, Any]:
    policy: dict[str, Any] = (
        {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    )
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if claims is not None:
        spec["resourceClaims"] = claims
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "team-a", **meta},
        "spec": spec,
    }


SHARED = {"name": "shared", "resourceClaimTemplateName": "four"}


def job(*claims: dict[str, Any], group: str | None = None, parallelism: int = 4) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"resourceClaims": list(claims), "containers": []}
    if group is not None:
        pod_spec["schedulingGroup"] = {"podGroupName": group}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {"parallelism": parallelism, "template": {"spec": pod_spec}},
    }


OWN = {"name": "gpu", "resourceClaimTemplateName": "two"}


@pytest.mark.parametrize(
    ("group", "owner", "devices"),
    [
        (podgroup(4), job(OWN), 8),
        (podgroup(4, [SHARED]), job(OWN, SHARED), 12),
        (podgroup(2, [SHARED]), job(OWN, SHARED, parallelism=8), 8),
        (podgroup(4, [SHARED]), None, 4),
        (
            podgroup(4, [SHARED]),
            job(OWN, {"name": "shared", "resourceClaimTemplateName": "one"}),
            16,
        ),
        (podgroup(3), None, 0),
    ],
    ids=[
        "min-count-times-per-pod",
        "shared-claim-once",
        "min-count-not-parallelism",
        "owner-unknown-shared-only",
        "same-name-other-template-is-the-pods-own",
        "nothing-known",
    ],
)
def test_podgroup_demand(group: dict[str, Any], owner: dict[str, Any] | None, devices: int) -> None:
    expected = {GPU: devices} if devices else {}
    assert podgroup_demand(group, owner, charges_of) == expected


@pytest.mark.parametrize(
    ("obj", "kinds", "gang"),
    [
        (podgroup(4), DEFAULT_GANG_KINDS, True),
        (podgroup(None), DEFAULT_GANG_KINDS, False),
        (podgroup(4), frozenset({"Job"}), False),
        ({**podgroup(4), "apiVersion": "scheduling.volcano.sh/v1beta1"}, DEFAULT_GANG_KINDS, False),
        (job(OWN, group="pg"), DEFAULT_GANG_KINDS, False),
        (job(OWN, group="pg"), frozenset({"Job"}), True),
        (job(OWN), DEFAULT_GANG_KINDS, True),
    ],
    ids=[
        "gang-policy",
        "basic-policy",
        "podgroup-not-listed",
        "volcano-podgroup",
        "job-whose-pods-name-a-podgroup",
        "job-whose-pods-name-a-podgroup-when-podgroups-not-listed",
        "job-alone",
    ],
)
def test_is_gang(obj: dict[str, Any], kinds: frozenset[str], gang: bool) -> None:
    assert is_gang(obj, kinds) is gang


@pytest.mark.parametrize(
    ("pod_claims", "names"),
    [
        ([OWN, SHARED], {"shared"}),
        ([{"name": "shared", "resourceClaimTemplateName": "one"}], set()),
        ([{"name": "other", "resourceClaimTemplateName": "four"}], set()),
        ([{"name": "shared", "resourceClaimName": "four"}], set()),
    ],
    ids=["same-name-same-template", "other-template", "other-name", "claim-not-template"],
)
def test_shared_names(pod_claims: list[dict[str, Any]], names: set[str]) -> None:
    assert shared_names({"resourceClaims": pod_claims}, podgroup(4, [SHARED])) == names


CONTROLLER = {"kind": "Job", "name": "train", "uid": "u", "controller": True}
WORKLOAD_OWNER = {"kind": "Workload", "name": "wl", "uid": "w"}
WORKLOAD = {"spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "byref"}}}


@pytest.mark.parametrize(
    ("meta", "workload", "owner"),
    [
        ({"ownerReferences": [CONTROLLER, WORKLOAD_OWNER]}, None, ("Job", "train")),
        ({"ownerReferences": [WORKLOAD_OWNER]}, WORKLOAD, ("Job", "byref")),
        ({}, None, ("", "")),
        ({"ownerReferences": [{**CONTROLLER, "controller": False}]}, None, ("", "")),
    ],
    ids=["job-controller", "workload-controller-ref", "none", "not-controller"],
)
def test_owner_of(
    meta: dict[str, Any], workload: dict[str, Any] | None, owner: tuple[str, str]
) -> None:
    assert owner_of(podgroup(4, **meta), workload) == owner


@pytest.mark.parametrize(
    ("old", "new", "held", "target"),
    [
        (None, 4, 0, 12),
        (4, 6, 12, 16),
        (4, 6, 5, 9),
        (4, 2, 12, 8),
        (4, 1, 3, 0),
        (4, 4, 5, None),
    ],
    ids=[
        "created-whole",
        "grows-by-the-difference",
        "grows-what-its-pods-left",
        "shrinks-by-the-difference",
        "shrinks-never-below-nothing",
        "min-count-unchanged-left-as-is",
    ],
)
def test_gang_target_of_a_min_count_change(
    old: int | None, new: int, held: int, target: int | None
) -> None:
    """minCount is mutable ("to support workload scaling"): the group's holder moves by the
    change of demand (2 GPUs a Pod, the shared 4 once), from what its Pods left of it."""
    owner = job(OWN, SHARED)
    new_group = podgroup(new, [SHARED])
    old_group = podgroup(old, [SHARED]) if old is not None else None
    needed = podgroup_demand(new_group, owner, charges_of)
    old_needed = podgroup_demand(old_group, owner, charges_of) if old_group else {}
    moved = gang_target(new_group, old_group, needed, old_needed, {GPU: held} if held else {})
    assert moved == (None if target is None else ({GPU: target} if target else {}))
