"""PodGroups (scheduling.k8s.io, Kubernetes 1.37 workload-aware scheduling) as gangs.

A PodGroup with a gang policy (`spec.schedulingPolicy.gang.minCount`) is the scheduler's own
unit of all-or-nothing: its Pods name it (`spec.schedulingGroup.podGroupName`), and its
`spec.resourceClaims` are shared by every Pod of the group (the claim is reserved for the
group, one claim per PodGroup from a template). Its demand is `minCount` Pods, each charged
as its CREATE would be without the group's claims, plus the group's claims once. A PodGroup
holds no pod template: the per-Pod shape is that of the workload that owns it (the Job whose
controller made it, or the one its Workload's `controllerRef` names).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.engine.counting import add_charges
from webhook.engine.prediction import ChargesOf, pod_groups

GROUP = "scheduling.k8s.io"
KIND = "PodGroup"
OWNER_KINDS = frozenset({"Job", "JobSet", "LeaderWorkerSet"})
"""The workloads whose pod template gives a PodGroup's per-Pod shape."""


def is_podgroup(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == KIND and str(obj.get("apiVersion", "")).startswith(f"{GROUP}/")


def min_count(podgroup: Mapping[str, Any]) -> int:
    """The gang's size; 0 for a PodGroup without a gang policy (no gang)."""
    policy = ((podgroup.get("spec") or {}).get("schedulingPolicy")) or {}
    count = (policy.get("gang") or {}).get("minCount") if isinstance(policy, Mapping) else None
    return count if isinstance(count, int) and count > 0 else 0


def group_claims(podgroup: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The PodGroup's shared claims, in the Pod's `resourceClaims` shape (one per entry)."""
    claims = (podgroup.get("spec") or {}).get("resourceClaims") or []
    return [c for c in claims if isinstance(c, Mapping) and c.get("name")]


def named_group(pod: Mapping[str, Any]) -> str | None:
    """The PodGroup a Pod names (`spec.schedulingGroup.podGroupName`), or None."""
    group = ((pod.get("spec") or {}).get("schedulingGroup")) or {}
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return name if isinstance(name, str) and name else None


def outside_group(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The Pod as if it named no PodGroup: what a Pod of a PodGroup without a gang policy
    (the Job controller makes `basic` ones) is, for quota: its owner's gang, if any."""
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "schedulingGroup"}
    return {**pod, "spec": spec}


def template_names_group(workload: Mapping[str, Any]) -> bool:
    """Whether a workload's Pods all name a PodGroup (its pod templates say so): the
    PodGroup then carries the gang, never the workload too."""
    specs = [spec for _, spec in pod_groups(workload)]
    return bool(specs) and all(named_group({"spec": spec}) for spec in specs)


def shared_names(pod_spec: Mapping[str, Any], podgroup: Mapping[str, Any]) -> frozenset[str]:
    """The Pod's claims that are the group's: same name, same claim or template (as the API
    server requires of a Pod's claim that matches a PodGroup's)."""
    group = {str(c["name"]): _source(c) for c in group_claims(podgroup)}
    return frozenset(
        str(c["name"])
        for c in pod_spec.get("resourceClaims") or []
        if isinstance(c, Mapping) and group.get(str(c.get("name"))) == _source(c)
    )


def _source(claim: Mapping[str, Any]) -> tuple[object, object]:
    return (claim.get("resourceClaimName"), claim.get("resourceClaimTemplateName"))


def without_claims(pod_spec: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """The pod spec without the claims in `names` (the group's, charged to the group)."""
    claims = pod_spec.get("resourceClaims") or []
    kept = [c for c in claims if not (isinstance(c, Mapping) and c.get("name") in names)]
    return {**pod_spec, "resourceClaims": kept}


def owner_of(podgroup: Mapping[str, Any], workload: Mapping[str, Any] | None) -> tuple[str, str]:
    """(kind, name) of the workload that owns the PodGroup's Pods: its controller owner
    reference, else the `controllerRef` of its Workload (`workload`, when read); ("", "")
    when neither names one."""
    meta = podgroup.get("metadata") or {}
    for owner in meta.get("ownerReferences") or []:
        if not isinstance(owner, Mapping) or owner.get("controller") is not True:
            continue
        if owner.get("kind") in OWNER_KINDS and owner.get("name"):
            return str(owner["kind"]), str(owner["name"])
    ref = ((workload or {}).get("spec") or {}).get("controllerRef") or {}
    if isinstance(ref, Mapping) and ref.get("kind") in OWNER_KINDS and ref.get("name"):
        return str(ref["kind"]), str(ref["name"])
    return "", ""


def workload_name(podgroup: Mapping[str, Any]) -> str | None:
    ref = ((podgroup.get("spec") or {}).get("workloadRef")) or {}
    name = ref.get("workloadName") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) and name else None


def podgroup_demand(
    podgroup: Mapping[str, Any], owner: Mapping[str, Any] | None, charges_of: ChargesOf
) -> dict[str, int]:
    """Devices per class of the whole gang: `minCount` Pods of the owner's pod template (the
    largest, per class, when it has several) without the group's claims, plus the group's
    claims once. Without the owner, only the group's claims are known."""
    count = min_count(podgroup)
    shared = charges_of({"resourceClaims": group_claims(podgroup)})
    per_pod = _per_pod(podgroup, owner, charges_of) if owner is not None else {}
    total = add_charges([shared, {c: count * n for c, n in per_pod.items()}])
    return {c: n for c, n in total.items() if n}


def _per_pod(
    podgroup: Mapping[str, Any], owner: Mapping[str, Any], charges_of: ChargesOf
) -> dict[str, int]:
    most: dict[str, int] = {}
    for charges in _template_charges(podgroup, owner, charges_of):
        for device_class, devices in charges.items():
            most[device_class] = max(most.get(device_class, 0), devices)
    return most


def _template_charges(
    podgroup: Mapping[str, Any], owner: Mapping[str, Any], charges_of: ChargesOf
) -> Iterator[Mapping[str, int]]:
    for _, pod_spec in pod_groups(owner):
        yield charges_of(without_claims(pod_spec, shared_names(pod_spec, podgroup)))
