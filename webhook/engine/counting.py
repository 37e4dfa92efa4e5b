"""How many devices a claim holds, counted exactly as Kubernetes ResourceQuota counts DRA.

ExactCount adds `count`; `All` adds 32 (`AllocationResultsMaxSize`, the most one claim can be
allocated) whatever the cluster publishes; `firstAvailable` adds, per class, the largest
alternative; adminAccess requests count too; an unknown allocation mode adds nothing. This is
`claimEvaluator.Usage` in Kubernetes 1.35 to 1.37 (pkg/quota/v1/evaluator/core/resource_claims.go),
so a tenant's numbers in dragate and in `kubectl describe quota` agree. The charge never
depends on the inventory: a charge that grows when a node joins (or is 0 before the first
ResourceSlice is published) would let the same claim pass or fail with the weather.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from webhook.engine.extended import EXTENDED_CLAIM, is_special_claim
from webhook.types import ALL_MODE_DEVICES, AllocationMode, ClaimSpec, DeviceRequest, Object

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
POD_PREFIX = "pod:"
_POD_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
"""`<namespace>/<name>` as the API server accepts them: only such a name is stored (a forged
review's name never reaches the ledger's records)."""


def devices_by_class(spec: ClaimSpec) -> dict[str, int]:
    """Devices the claim charges per DeviceClass."""
    totals: dict[str, int] = {}
    for request in spec.requests:
        for device_class, devices in request_charges(request).items():
            totals[device_class] = totals.get(device_class, 0) + devices
    return totals


def request_charges(request: DeviceRequest) -> dict[str, int]:
    """Per class, the most devices any alternative of this request could take."""
    charges: dict[str, int] = {}
    for leaf in request.leaves():
        devices = leaf_devices(leaf)
        charges[leaf.device_class] = max(charges.get(leaf.device_class, 0), devices)
    return charges


def leaf_devices(leaf: DeviceRequest) -> int:
    """ResourceQuota's worst case for one (sub)request: 32 for `All`, else its count."""
    if leaf.allocation_mode == AllocationMode.ALL:
        return ALL_MODE_DEVICES
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
    instead of counting twice; so is the claim kube-scheduler makes for a Pod's extended
    resources (`extended.special_claim`), under the name `<extended-resources>`.
    """
    meta = claim.get("metadata") or {}
    pod_claim = (meta.get("annotations") or {}).get(POD_CLAIM_ANNOTATION)
    owner = next(
        (o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod" and o.get("uid")),
        None,
    )
    if pod_claim and owner is not None:
        return pod_holder_key(str(owner["uid"]), str(pod_claim))
    if is_special_claim(claim) and owner is not None and _controls(owner):
        return pod_holder_key(str(owner["uid"]), EXTENDED_CLAIM)
    return f"claim:{meta.get('namespace', '')}/{meta.get('name') or meta.get('generateName', '')}"


def _controls(owner: Mapping[str, object]) -> bool:
    """A Pod's controller reference, as kube-scheduler writes it on its special claim."""
    return owner.get("controller") is True and owner.get("apiVersion") == "v1"


def pod_holder_key(pod_uid: str, pod_claim: str) -> str:
    return f"{POD_PREFIX}{pod_uid}/{pod_claim}"


def pod_name(namespace: str, name: object) -> str | None:
    """A Pod's `<namespace>/<name>`, kept beside its holders (keyed by uid) for people; None
    when it has no name yet (`generateName` before the API server filled it) or a bad one."""
    named = f"{namespace}/{name}" if isinstance(name, str) and name else ""
    return named if _POD_NAME.fullmatch(named) else None


def holder_pod_name(claim: Object) -> str | None:
    """The Pod a generated claim is for, as `<namespace>/<name>` (its owner reference)."""
    meta = claim.get("metadata") or {}
    for owner in meta.get("ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("kind") == "Pod" and owner.get("uid"):
            return pod_name(str(meta.get("namespace", "")), owner.get("name"))
    return None


def holder_shown(key: str, name: str) -> str:
    """A holder as a denial names it: a Pod's by `pod:<namespace>/<name>/<pod claim>` when
    its name is known, anything else (or a Pod recorded without a name) by its key."""
    if not name or not key.startswith(POD_PREFIX):
        return key
    return f"{POD_PREFIX}{name}/{key.partition('/')[2]}"
