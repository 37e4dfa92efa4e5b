"""A gang's CREATE or UPDATE reserves its whole demand under one holder; its Pods draw from it.

The engine says what the holder must hold (`gangs.gang_target`) and whether that fits
(`gangs.gang_decision`); here the ledger's atomic check-and-reserve makes it so. A Pod of a
gang is reserved with a draw on the gang's holder in the same call (`accounting.is_draw`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from webhook.engine.counting import add_charges
from webhook.engine.gangs import (
    gang_decision,
    gang_demand,
    gang_key,
    gang_target,
    is_gang,
    key_of,
    pod_charges,
    pod_gang,
)
from webhook.engine.podgroups import (
    group_claims,
    is_podgroup,
    min_count,
    named_group,
    outside_group,
    owner_of,
    podgroup_demand,
    shared_names,
    without_claims,
    workload_name,
)
from webhook.engine.prediction import pod_groups
from webhook.engine.quota import limits_of
from webhook.pipeline.context import Context
from webhook.rewrite import rewrite_object
from webhook.rewrite.mappings import native_resources
from webhook.types import (
    AdmissionRequest,
    Deadline,
    Decision,
    Facts,
    Object,
    Operation,
    PolicySet,
    Reason,
    Tenant,
    Verdict,
)


def is_gang_request(request: AdmissionRequest, settings_kinds: frozenset[str]) -> bool:
    """A gang's workload being created or changed (or one that stops being a gang)."""
    old = request.old_object if request.operation is Operation.UPDATE else None
    return any(obj is not None and is_gang(obj, settings_kinds) for obj in (request.object, old))


def gang_verdict(
    request: AdmissionRequest,
    policies: PolicySet,
    context: Context,
    facts: Facts,
    deadline: Deadline,
) -> Verdict:
    """Judge the gang's holder as the request leaves it, and reserve it unless refused."""
    tenant = facts.tenant
    if tenant is None or request.object is None:
        return Verdict(Decision())
    key = key_of(request.namespace, request.kind, request.name)
    new, old = request.object, request.old_object
    if request.operation is not Operation.UPDATE:
        old = None
    owner = _owner(new, request.namespace, context, policies.settings.gang_kinds)
    facts = replace(facts, templates=_templates(request, context, owner))
    needed = _demand(new, request, policies, facts, deadline, owner)
    old_needed = _demand(old, request, policies, facts, deadline, owner)
    held = {c: u.held_by((key,)) for c, u in facts.usage.items()}
    target = gang_target(new, old, needed, old_needed, held)
    if target is None:
        return Verdict(Decision(tenant=tenant.name))
    name = f"{request.namespace}/{request.name}"
    released = (gang_key(owner),) if owner is not None and old is None else ()
    decision = gang_decision(tenant, key, name, target, facts.usage, released=released)
    if not decision.allowed or request.dry_run:
        return Verdict(decision)
    return Verdict(_reserved(decision, tenant, name, context, deadline))


def _owner(obj: Object, namespace: str, context: Context, kinds: frozenset[str]) -> Object | None:
    """The workload that owns a PodGroup's Pods (its per-Pod shape), as the cluster has it;
    None for any other gang, or when it cannot be found (only the group's claims are then
    charged, and its Pods beyond what the holder keeps are charged as usual)."""
    if not is_podgroup(obj):
        return None
    wl = workload_name(obj)
    workload = context.state.workload(namespace, "Workload", wl) if wl else None
    kind, name = owner_of(obj, workload)
    return context.state.workload(namespace, kind, name) if kind else None


def _demand(  # noqa: PLR0917
    obj: Object | None,
    request: AdmissionRequest,
    policies: PolicySet,
    facts: Facts,
    deadline: Deadline,
    owner: Object | None = None,
) -> dict[str, int]:
    """The gang's devices per class, its Pods charged as their CREATEs would be (legacy
    resources as rewritten, or as the claim kube-scheduler makes for those a DeviceClass
    maps); nothing for a workload that is no gang."""
    if obj is None or not is_gang(obj, policies.settings.gang_kinds):
        return {}
    classes = facts.device_classes
    shaped = owner if is_podgroup(obj) else obj
    rewritten = None if shaped is None else rewrite_object(
        shaped, policies.mappings, namespace=request.namespace,
        native_resources=native_resources(classes.values()), deadline=deadline,
    )  # fmt: skip
    made = {str(t["metadata"]["name"]): t for t in rewritten.templates} if rewritten else {}

    def template(name: str) -> Object | None:
        return made.get(name) or facts.templates.get(name)

    def charges_of(spec: Mapping[str, Any]) -> Mapping[str, int]:
        return pod_charges(spec, template, classes)

    if is_podgroup(obj):
        return podgroup_demand(obj, rewritten.object if rewritten else None, charges_of)
    return gang_demand(rewritten.object if rewritten else obj, charges_of)


def _reserved(
    decision: Decision, tenant: Tenant, name: str, context: Context, deadline: Deadline
) -> Decision:
    """The gang's decision once the ledger reserved its holder; re-judged with the usage
    that refused it otherwise, so the denial names the numbers and the holders."""
    key = next(iter(decision.holds))
    deadline.check("reserving quota")
    reservation = context.ledger.reserve(tenant.name, decision.holds, limits_of(tenant), deadline)
    if reservation.granted:
        return decision
    refused = gang_decision(tenant, key, name, decision.holds[key], reservation.usage)
    if not refused.allowed:
        return refused
    reason = Reason(
        policy=f"Tenant/{tenant.name}",
        message="quota changed while this request was admitted; retry",
        tenant=tenant.name,
    )
    return replace(refused, allowed=False, reasons=(reason,))


def _templates(
    request: AdmissionRequest, context: Context, owner: Object | None
) -> dict[str, Object]:
    """The ResourceClaimTemplates the workload's pod templates name (a PodGroup's: its
    owner's, and its own claims'), as the cluster has them."""
    objects = [obj for obj in (request.object, request.old_object, owner) if obj]
    pod_specs = [spec for obj in objects for _, spec in pod_groups(obj)]
    pod_specs += [{"resourceClaims": group_claims(obj)} for obj in objects if is_podgroup(obj)]
    names = {
        str(claim.get("resourceClaimTemplateName"))
        for pod_spec in pod_specs
        for claim in pod_spec.get("resourceClaims") or []
        if isinstance(claim, Mapping) and claim.get("resourceClaimTemplateName")
    }
    found = {name: context.state.template(request.namespace, name) for name in sorted(names)}
    return {name: t for name, t in found.items() if t is not None}


def with_draw(
    request: AdmissionRequest, policies: PolicySet, holds: Mapping[str, Mapping[str, int]]
) -> dict[str, Mapping[str, int]]:
    """A Pod's holds, with a draw of the same devices on its gang's holder when it has one."""
    gang = pod_gang(request.object or {}, request.namespace, policies.settings.gang_kinds)
    group_claim = request.kind == "ResourceClaim" and gang is not None and "/PodGroup/" in gang
    if gang is None or (request.kind != "Pod" and not group_claim):
        return dict(holds)
    return {**holds, gang: {c: -n for c, n in add_charges(holds.values()).items()}}


def without_group_claims(request: AdmissionRequest, context: Context) -> AdmissionRequest:
    """A Pod that names a PodGroup, judged without the claims it shares with the group: those
    are the group's (reserved for it, one claim for every Pod), charged once with the group
    and never once per Pod. A Pod whose PodGroup is no gang (or not there) is judged as if it
    named none: it belongs to its owner's gang, if any. Any other request as it is."""
    pod = request.object
    group = named_group(pod) if request.kind == "Pod" and pod else None
    if pod is None or group is None:
        return request
    podgroup = context.state.workload(request.namespace, "PodGroup", group)
    if podgroup is None or not min_count(podgroup):
        return request.with_object(outside_group(pod))
    spec = pod.get("spec") or {}
    shared = shared_names(spec, podgroup)
    if not shared:
        return request
    return request.with_object({**pod, "spec": without_claims(spec, shared)})
