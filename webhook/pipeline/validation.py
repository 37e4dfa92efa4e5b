"""/validate: judge with the facts, predict a workload's fit, reserve an allowed CREATE.

On an allowed CREATE that holds devices the ledger reserves them atomically; when it
refuses, the request is judged again with the usage that refused it, so the denial names
the numbers and the holders.
"""

from __future__ import annotations

from dataclasses import replace

from webhook.engine import evaluate
from webhook.engine.counting import add_charges, devices_by_class
from webhook.engine.gangs import GANG_ONLY_KINDS
from webhook.engine.normalize import ObjectError, template_claim_spec
from webhook.engine.prediction import PREDICTED_KINDS, demand, fit_warnings
from webhook.engine.quota import limits_of
from webhook.pipeline.context import Context
from webhook.pipeline.facts import gather, out_of_time
from webhook.pipeline.gangholds import (
    gang_verdict,
    is_gang_request,
    with_draw,
    without_group_claims,
)
from webhook.pipeline.mutation import legacy_pod_denial
from webhook.pipeline.scope import is_policy_object
from webhook.rewrite import rewrite_object
from webhook.types import (
    Action,
    AdmissionRequest,
    Deadline,
    Decision,
    Facts,
    FactsUnavailable,
    Object,
    PolicySet,
    Reason,
    Settings,
    Tenant,
    Verdict,
)


def validate(
    request: AdmissionRequest, policies: PolicySet, context: Context, deadline: Deadline
) -> Verdict:
    """Judge a request `scope.handles` let through; without facts, Settings decide."""
    if is_policy_object(request):
        return Verdict(policy_object_decision(request, context))
    try:
        return _validate_with_facts(request, policies, context, deadline)
    except FactsUnavailable as err:
        out_of_time(deadline, err)
        return Verdict(unavailable(policies.settings, err))


def policy_object_decision(request: AdmissionRequest, context: Context) -> Decision:
    """A policy object is refused when it would not be enforced: the loader's own problems."""
    problems = context.policy_check(request.object or {}) if context.policy_check else ()
    if not problems:
        return Decision()
    name = f"{request.kind}/{request.name}"
    reasons = tuple(
        Reason(policy="dragate/policy-object", message=f"{name} would not be enforced: {p}")
        for p in problems
    )
    return Decision(allowed=False, reasons=reasons)


def unavailable(settings: Settings, err: FactsUnavailable) -> Decision:
    """The explicit outcome when facts cannot be had: fail closed unless Settings say Warn."""
    message = f"cluster state unavailable, quota cannot be checked: {err}"
    if settings.when_state_unavailable == Action.WARN:
        return Decision(warnings=(f"dragate: {message}; admitted without a quota check",))
    reason = Reason(policy="Settings/whenStateUnavailable", message=f"{message}; retry later")
    return Decision(allowed=False, reasons=(reason,))


def _validate_with_facts(
    request: AdmissionRequest, policies: PolicySet, context: Context, deadline: Deadline
) -> Verdict:
    request = without_group_claims(request, context)
    facts = gather(request, policies, context)
    legacy = legacy_pod_denial(request, policies, facts, context, deadline)
    if legacy is not None:
        return Verdict(legacy)
    if facts.tenant is not None and _needs_usage(request, facts.tenant):
        deadline.check("reading the tenant's usage")
        facts = facts.with_usage(context.ledger.usage(facts.tenant.name, deadline))
    if is_gang_request(request, policies.settings.gang_kinds):
        return gang_verdict(request, policies, context, facts, deadline)
    if (request.group, request.kind) in PREDICTED_KINDS:
        warnings = _predictions(request, policies, context, facts, deadline)
        tenant = facts.tenant.name if facts.tenant else ""
        return Verdict(Decision(warnings=warnings, tenant=tenant))
    decision = evaluate(request, policies, facts, deadline)
    if not decision.allowed or not decision.holds or facts.tenant is None or request.dry_run:
        return Verdict(decision)
    deadline.check("reserving quota")
    limits = limits_of(facts.tenant)
    holds = with_draw(request, policies, decision.holds)
    reservation = context.ledger.reserve(
        facts.tenant.name, holds, limits, deadline, names=decision.names or None
    )
    if reservation.granted:
        return Verdict(decision)
    return Verdict(_refused(request, policies, facts.with_usage(reservation.usage)))


def _needs_usage(request: AdmissionRequest, tenant: Tenant) -> bool:
    """Whether the tenant's usage must be read before judging.

    A real CREATE is judged optimistically: the ledger's atomic reserve is the check that
    counts, and when it refuses, the request is judged again with the usage that refused it
    (`_refused`), so the denial still names the numbers and the holders. A dry run writes
    nothing, and a workload's fit is predicted against usage, so those read it first. So does
    an object that may hold devices of a tenant in Warn or Audit with a `maxDevices`: the
    ledger never refuses it (`limits_of`), so its limit is judged here, against the usage as
    read.
    """
    return (
        request.dry_run
        or (request.group, request.kind) in PREDICTED_KINDS
        or (request.group, request.kind) in GANG_ONLY_KINDS
        or (
            tenant.enforcement != Action.DENY
            and any(q.max_devices is not None for q in tenant.quota)
            and _may_hold(request)
        )
    )


def _may_hold(request: AdmissionRequest) -> bool:
    """A claim, or a Pod that names claims: the objects whose CREATE reserves devices."""
    if request.kind == "ResourceClaim":
        return True
    spec = (request.object or {}).get("spec")
    return request.kind == "Pod" and isinstance(spec, dict) and bool(spec.get("resourceClaims"))


def _predictions(
    request: AdmissionRequest,
    policies: PolicySet,
    context: Context,
    facts: Facts,
    deadline: Deadline,
) -> tuple[str, ...]:
    """Warnings when a workload's Pods would not fit its tenant's remaining quota."""
    if facts.tenant is None or request.object is None:
        return ()
    rewritten = rewrite_object(
        request.object, policies.mappings, namespace=request.namespace, deadline=deadline
    )
    made = {str(t["metadata"]["name"]): t for t in rewritten.templates}

    def charges_of(pod_spec: Object) -> dict[str, int]:
        templates = (
            made.get(name) or context.state.template(request.namespace, name)
            for claim in pod_spec.get("resourceClaims") or []
            if isinstance(claim, dict) and (name := str(claim.get("resourceClaimTemplateName")))
        )
        return add_charges(_template_charges(t) for t in templates if t is not None)

    needed = demand(rewritten.object, charges_of)
    name = f"{request.kind} {request.namespace}/{request.name}"
    return tuple(fit_warnings(name, needed, facts.tenant, facts.usage))


def _template_charges(template: Object) -> dict[str, int]:
    try:
        return devices_by_class(template_claim_spec(template, "template"))
    except ObjectError:
        return {}


def _refused(request: AdmissionRequest, policies: PolicySet, facts: Facts) -> Decision:
    """The denial after the ledger refused: re-judged with the usage that refused it."""
    decision = evaluate(request, policies, facts)
    if not decision.allowed:
        return decision
    reason = Reason(
        policy=f"Tenant/{facts.tenant.name if facts.tenant else ''}",
        message="quota changed while this request was admitted; retry",
        tenant=facts.tenant.name if facts.tenant else "",
    )
    return replace(decision, allowed=False, reasons=(reason,))
