"""The truth of gangs' holders: what each running gang still holds for Pods not yet claimed.

A gang's holder is reserved whole at the workload's creation and drawn down as its Pods are
admitted (`pipeline.gangs`). Once the cluster is read, the holder is what the gang's demand
leaves after what its members' claims hold: max(0, demand - members), per class. A gang
suspended or finished holds nothing; one whose workload is gone is missing from the truth,
so the ledger drops its holder as any other. When the workloads cannot be read, the gangs'
holders are left out of the truth and lapse like any pending holder: their Pods are then
charged one by one, which never lets a tenant pass its quota.

A PodGroup's members are the Pods that name it and the claims it owns (its shared claims);
a workload whose PodGroup carries its gang holds nothing, and a Pod that names a PodGroup
without a gang policy belongs to its owner's gang, as its admission judged it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook.engine.counting import POD_PREFIX, holder_key
from webhook.engine.gangs import (
    gang_demand,
    gang_key,
    is_finished,
    is_gang,
    is_suspended,
    key_of,
    pod_charges,
    pod_gang,
)
from webhook.engine.podgroups import (
    is_podgroup,
    named_group,
    outside_group,
    owner_of,
    podgroup_demand,
    workload_name,
)
from webhook.engine.tenancy import namespace_labels, resolve_tenant
from webhook.ledger.accounting import Holds
from webhook.rewrite import rewrite_object
from webhook.rewrite.mappings import native_resources
from webhook.types import ClusterState, FactsUnavailable, Object, PolicySet

log = logging.getLogger("dragate.ledger.gangtruth")


def add_gang_holds(
    policies: PolicySet,
    state: ClusterState,
    namespaces: Mapping[str, Object],
    tenants: dict[str, Holds],
) -> None:
    """Put each gang's holder into `tenants` (the claims' truth, per tenant), when `state`
    keeps the workloads; without them the ledger keeps gangs' holders pending."""
    kinds = policies.settings.gang_kinds
    if not kinds:
        return
    try:
        found = state.workloads()
    except FactsUnavailable as err:
        log.warning("reconcile: gangs' holders left to expire: %s", err)
        return
    if found is None:
        return
    pods = _in_gang_groups(found, kinds)
    carried = _carried_by_podgroups(found, kinds)
    for workload in found:
        if workload.get("kind") == "Pod" or not is_gang(workload, kinds):
            continue
        namespace = str((workload.get("metadata") or {}).get("namespace", ""))
        tenant = resolve_tenant(
            policies, namespace, namespace_labels(namespaces.get(namespace), namespace)
        )
        if tenant is None:
            continue
        holds = tenants.setdefault(tenant.name, {})
        key = gang_key(workload)
        if key in carried:
            holds[key] = {}
            continue
        members = [*_members(key, pods, kinds), *_group_claims(workload, state)]
        owner = _owner(workload, found) if is_podgroup(workload) else None
        holds[key] = _left(workload, owner, policies, state, members, holds)


def _in_gang_groups(found: Sequence[Object], kinds: frozenset[str]) -> list[Object]:
    """The Pods, each that names a PodGroup without a gang policy (or one not found) as if it
    named none, as its admission judged it: it belongs to its owner's gang."""
    gangs = {
        (str(meta.get("namespace", "")), str(meta.get("name", "")))
        for obj in found
        if is_podgroup(obj) and is_gang(obj, kinds)
        for meta in [obj.get("metadata") or {}]
    }
    return [
        pod
        if (group := named_group(pod)) is None
        or (str((pod.get("metadata") or {}).get("namespace", "")), group) in gangs
        else outside_group(pod)
        for pod in found
        if pod.get("kind") == "Pod"
    ]


def _carried_by_podgroups(found: Sequence[Object], kinds: frozenset[str]) -> set[str]:
    """The gangs of workloads whose PodGroup carries their gang (they hold nothing)."""
    return {
        key_of(str((obj.get("metadata") or {}).get("namespace", "")), *owner_of(obj, None))
        for obj in found
        if is_podgroup(obj) and is_gang(obj, kinds) and owner_of(obj, None)[0]
    }


def _owner(podgroup: Object, found: Sequence[Object]) -> Object | None:
    """The workload whose pod template is the PodGroup's per-Pod shape, among `found`."""
    namespace = str((podgroup.get("metadata") or {}).get("namespace", ""))
    by_name = {
        (str(o.get("kind")), str((o.get("metadata") or {}).get("name"))): o
        for o in found
        if (o.get("metadata") or {}).get("namespace") == namespace
    }
    kind, name = owner_of(podgroup, by_name.get(("Workload", workload_name(podgroup) or "")))
    return by_name.get((kind, name))


def _group_claims(workload: Object, state: ClusterState) -> list[str]:
    """The holder keys of the claims the PodGroup owns (its shared claims, once made)."""
    if not is_podgroup(workload):
        return []
    meta = workload.get("metadata") or {}
    return [
        holder_key(claim)
        for claim in state.claims()
        if (claim.get("metadata") or {}).get("namespace") == meta.get("namespace")
        and any(
            o.get("kind") == "PodGroup" and o.get("name") == meta.get("name")
            for o in (claim.get("metadata") or {}).get("ownerReferences") or []
        )
    ]


def _members(key: str, pods: Iterable[Object], kinds: frozenset[str]) -> list[str]:
    """The holder prefixes (`pod:<uid>/`) of the gang's Pods."""
    prefixes = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("uid") and pod_gang(pod, str(meta.get("namespace", "")), kinds) == key:
            prefixes.append(f"{POD_PREFIX}{meta['uid']}/")
    return prefixes


def _left(  # noqa: PLR0917
    workload: Object,
    owner: Object | None,
    policies: PolicySet,
    state: ClusterState,
    members: Sequence[str],
    holds: Holds,
) -> dict[str, int]:
    if is_suspended(workload) or is_finished(workload):
        return {}
    needed = _demand(workload, owner, policies, state)
    claimed: dict[str, int] = {}
    for key, devices in holds.items():
        if members and (key.startswith(tuple(members)) or key in members):
            for device_class, count in devices.items():
                claimed[device_class] = claimed.get(device_class, 0) + count
    left = {c: n - claimed.get(c, 0) for c, n in needed.items()}
    return {c: n for c, n in left.items() if n > 0}


def _demand(
    workload: Object, owner: Object | None, policies: PolicySet, state: ClusterState
) -> dict[str, int]:
    """The gang's demand as its creation was charged: legacy resources as rewritten; a
    PodGroup's from its owner's pod template."""
    namespace = str((workload.get("metadata") or {}).get("namespace", ""))
    classes = state.device_classes()
    shaped = owner if is_podgroup(workload) else workload
    rewritten = None if shaped is None else rewrite_object(
        shaped, policies.mappings, namespace=namespace,
        native_resources=native_resources(classes.values()),
    )  # fmt: skip
    made = {str(t["metadata"]["name"]): t for t in rewritten.templates} if rewritten else {}

    def template(name: str) -> Object | None:
        return made.get(name) or state.template(namespace, name)

    def charges_of(spec: Mapping[str, Any]) -> Mapping[str, int]:
        return pod_charges(spec, template, classes)

    if is_podgroup(workload):
        return podgroup_demand(workload, rewritten.object if rewritten else None, charges_of)
    return gang_demand(rewritten.object if rewritten else workload, charges_of)
