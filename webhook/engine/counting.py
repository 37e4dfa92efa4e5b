"""How many devices a claim holds, counted exactly as Kubernetes ResourceQuota counts DRA.

ExactCount adds `count`; `All` adds the number of devices the class can match when the
inventory is known, else 32 (the most one claim can be allocated); `firstAvailable` adds,
per class, the largest alternative; adminAccess requests count too. Sharing the counting with
ResourceQuota means a tenant's numbers in dragate and in `kubectl describe quota` agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.types import ALL_MODE_DEVICES, AllocationMode, ClaimSpec, DeviceRequest, Object

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def devices_by_class(
    spec: ClaimSpec, class_capacity: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Devices the claim charges per DeviceClass."""
    totals: dict[str, int] = {}
    for request in spec.requests:
        for device_class, devices in request_charges(request, class_capacity).items():
            totals[device_class] = totals.get(device_class, 0) + devices
    return totals


def request_charges(
    request: DeviceRequest, class_capacity: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Per class, the most devices any alternative of this request could take."""
    charges: dict[str, int] = {}
    for leaf in request.leaves():
        devices = leaf_devices(leaf, class_capacity)
        charges[leaf.device_class] = max(charges.get(leaf.device_class, 0), devices)
    return charges


def leaf_devices(leaf: DeviceRequest, class_capacity: Mapping[str, int] | None = None) -> int:
    if leaf.allocation_mode == AllocationMode.ALL:
        known = (class_capacity or {}).get(leaf.device_class)
        return known if known is not None else ALL_MODE_DEVICES
    return leaf.count


def add_charges(totals: Iterable[Mapping[str, int]]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for charges in totals:
        for device_class, devices in charges.items():
            merged[device_class] = merged.get(device_class, 0) + devices
    return {c: n for c, n in merged.items() if n}


def holder_key(claim: Object) -> str:
    """The ledger key a claim's devices are held under.

    A claim the resourceclaim controller generated for a Pod is keyed by the Pod's uid and pod
    claim name, the same key the Pod's CREATE reserved under, so it consumes that reservation
    instead of counting twice.
    """
    meta = claim.get("metadata") or {}
    pod_claim = (meta.get("annotations") or {}).get(POD_CLAIM_ANNOTATION)
    owner = next(
        (o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod" and o.get("uid")),
        None,
    )
    if pod_claim and owner is not None:
        return pod_holder_key(str(owner["uid"]), str(pod_claim))
    return f"claim:{meta.get('namespace', '')}/{meta.get('name') or meta.get('generateName', '')}"


def pod_holder_key(pod_uid: str, pod_claim: str) -> str:
    return f"pod:{pod_uid}/{pod_claim}"
