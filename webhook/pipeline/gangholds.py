"""A gang's CREATE or UPDATE reserves its whole demand under one holder; its Pods draw from it.

The engine says what the holder must hold (`gangs.gang_target`) and whether that fits
(`gangs.gang_decision`); here the ledger's atomic check-and-reserve makes it so. A Pod of a
gang is reserved with a draw on the gang's holder in the same call (`accounting.is_draw`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from webhook.engine.counting import add_charges
from webhook.engine.gangs import (
    gang_decision,
    gang_demand,
    gang_target,
    is_gang,
    key_of,
    pod_charges,
    pod_gang,
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
    facts = replace(facts, templates=_templates(request, context))
    needed = _demand(new, request, policies, facts, deadline)
    old_needed = _demand(old, request, policies, facts, deadline)
    held = {c: u.held_by((key,)) for c, u in facts.usage.items()}
    target = gang_target(new, old, needed, old_needed, held)
    if target is None:
        return Verdict(Decision(tenant=tenant.name))
    name = f"{request.namespace}/{request.name}"
    decision = gang_decision(tenant, key, name, target, facts.usage)
    if not decision.allowed or request.dry_run:
        return Verdict(decision)
    return Verdict(_reserved(decision, tenant, name, context, deadline))


def _demand(
    obj: Object | None,
    request: AdmissionRequest,
    policies: PolicySet,
    facts: Facts,
    deadline: Deadline,
) -> dict[str, int]:
    """The gang's devices per class, its Pods charged as their CREATEs would be (legacy
    resources as rewritten, or as the claim kube-scheduler makes for those a DeviceClass
    maps); nothing for a workload that is no gang."""
    if obj is None or not is_gang(obj, policies.settings.gang_kinds):
        return {}
    classes = facts.device_classes
    rewritten = rewrite_object(
        obj, policies.mappings, namespace=request.namespace,
        native_resources=native_resources(classes.values()), deadline=deadline,
    )  # fmt: skip
    made = {str(t["metadata"]["name"]): t for t in rewritten.templates}

    def template(name: str) -> Object | None:
        return made.get(name) or facts.templates.get(name)

    return gang_demand(rewritten.object, lambda spec: pod_charges(spec, template, classes))


def _reserved(
    decision: Decision, tenant: Tenant, name: str, context: Context, deadline: Deadline
) -> Decision:
    """The gang's decision once the ledger reserved its holder; re-judged with the usage
    that refused it otherwise, so the denial names the numbers and the holders."""
    (key,) = decision.holds
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


def _templates(request: AdmissionRequest, context: Context) -> dict[str, Object]:
    """The ResourceClaimTemplates the workload's pod templates name, as the cluster has them."""
    names = {
        str(claim.get("resourceClaimTemplateName"))
        for obj in (request.object, request.old_object)
        for _, pod_spec in pod_groups(obj or {})
        for claim in pod_spec.get("resourceClaims") or []
        if isinstance(claim, dict) and claim.get("resourceClaimTemplateName")
    }
    found = {name: context.state.template(request.namespace, name) for name in sorted(names)}
    return {name: t for name, t in found.items() if t is not None}


def with_draw(
    request: AdmissionRequest, policies: PolicySet, holds: Mapping[str, Mapping[str, int]]
) -> dict[str, Mapping[str, int]]:
    """A Pod's holds, with a draw of the same devices on its gang's holder when it has one."""
    gang = pod_gang(request.object or {}, request.namespace, policies.settings.gang_kinds)
    if gang is None or request.kind != "Pod":
        return dict(holds)
    return {**holds, gang: {c: -n for c, n in add_charges(holds.values()).items()}}
