"""/mutate: a legacy Pod rewritten into DRA claims, refused when its rewrite breaks policy.

The rewrite is judged here only when a template must be created for it, so that nothing is
left behind a denial; once every template it refers to exists, validation judges the patched
Pod (the one judgement, not the same one twice). Validation uses the same judgement
(`legacy_pod_denial`): a legacy Pod that reaches it unchanged is judged as its rewrite would be.
"""

from __future__ import annotations

from dataclasses import replace

from webhook.engine import evaluate
from webhook.pipeline.context import Context
from webhook.pipeline.facts import gather, out_of_time
from webhook.rewrite import PodRewrite, rewrite_pod
from webhook.rewrite.mappings import native_resources
from webhook.rewrite.podspec import asks_legacy
from webhook.types import (
    AdmissionRequest,
    Deadline,
    Decision,
    Facts,
    FactsUnavailable,
    PolicySet,
    Reason,
    Verdict,
)


def mutate(
    request: AdmissionRequest, policies: PolicySet, context: Context, deadline: Deadline
) -> Verdict:
    """Rewrite a Pod CREATE (`scope.handles` let only those through); fails open, saying why."""
    try:
        return _rewrite(request, policies, context, deadline)
    except FactsUnavailable as err:
        out_of_time(deadline, err)
        warning = f"dragate: legacy GPU resources not rewritten, cluster state unavailable: {err}"
        return Verdict(Decision(warnings=(warning,)))


def _rewrite(
    request: AdmissionRequest,
    policies: PolicySet,
    context: Context,
    deadline: Deadline,
) -> Verdict:
    facts = gather(request, policies, context)
    rewrite = _rewritten(request, policies, facts, deadline)
    if not _made_already(request, rewrite, context):
        denial = _counted_denial(
            request, policies, facts, rewrite, context=context, deadline=deadline
        )
        if denial is not None:
            return Verdict(denial)
        _create_templates(request, rewrite, context, deadline)
    return Verdict(
        Decision(warnings=rewrite.notes, tenant=facts.tenant.name if facts.tenant else ""),
        patch=list(rewrite.patch) if rewrite.changed else (),
        rewritten=rewrite.rewritten if rewrite.changed else None,
    )


def _create_templates(
    request: AdmissionRequest, rewrite: PodRewrite, context: Context, deadline: Deadline
) -> None:
    if rewrite.templates and context.templates is not None:
        deadline.check("creating ResourceClaimTemplates")
        context.templates(
            request.namespace, rewrite.templates, request.dry_run, deadline.remaining()
        )


def _made_already(request: AdmissionRequest, rewrite: PodRewrite, context: Context) -> bool:
    """Every template the rewrite refers to is in the cluster already: none is handed to the
    template sink, nothing would be left behind by a denial, and the validating webhook judges
    the rewritten Pod against those very templates (one judgement, not the same one twice)."""
    if rewrite.denied or not rewrite.templates:
        return False
    template = context.state.template
    return all(
        template(request.namespace, str(t["metadata"]["name"])) is not None
        for t in rewrite.templates
    )


def legacy_pod_denial(
    request: AdmissionRequest,
    policies: PolicySet,
    facts: Facts,
    context: Context,
    deadline: Deadline,
) -> Decision | None:
    """A legacy Pod that reached validation unchanged (the mutating webhook was skipped, or
    failed open) is judged as its rewrite: it may not bypass the policy by keeping the
    device plugin's resources. Nothing is reserved for it: it holds no DRA claim. A Pod that
    asks for no legacy resource has nothing to rewrite, and is not copied to find that out."""
    if request.kind != "Pod" or not asks_legacy(
        (request.object or {}).get("spec"), policies.mappings
    ):
        return None
    rewrite = _rewritten(request, policies, facts, deadline)
    return _counted_denial(request, policies, facts, rewrite, context=context, deadline=deadline)


def _rewritten(
    request: AdmissionRequest, policies: PolicySet, facts: Facts, deadline: Deadline
) -> PodRewrite:
    """The rewrite and its patch; `scope.handles` lets only Pods through, and any other object
    goes the general way inside `rewrite_pod`. Long (a container at a time) past `deadline`,
    it stops there (DeadlineExceeded)."""
    return rewrite_pod(
        request.object or {},
        policies.mappings,
        native_resources=native_resources(facts.device_classes.values()),
        action_override=facts.tenant.mapping_action if facts.tenant else None,
        namespace=request.namespace,
        deadline=deadline,
        memos=policies.memos,
    )


def _counted_denial(
    request: AdmissionRequest,
    policies: PolicySet,
    facts: Facts,
    rewrite: PodRewrite,
    *,
    context: Context,
    deadline: Deadline,
) -> Decision | None:
    """`_rewrite_denial`, judged first without the tenant's usage as validation judges (most
    rewrites are allowed, and the ledger's reserve is what counts); a denial is judged again
    with the usage, so that its numbers and holders are the ledger's, as validation's are."""
    denial = _rewrite_denial(request, policies, facts, rewrite, deadline)
    if denial is None or facts.tenant is None:
        return denial
    deadline.check("reading the tenant's usage")
    try:
        usage = context.ledger.usage(facts.tenant.name, deadline)
    except FactsUnavailable:
        return denial  # refused all the same; only its numbers lack the usage
    again = _rewrite_denial(request, policies, facts.with_usage(usage), rewrite, deadline)
    return again or denial


def _rewrite_denial(
    request: AdmissionRequest,
    policies: PolicySet,
    facts: Facts,
    rewrite: PodRewrite,
    deadline: Deadline,
) -> Decision | None:
    """Why the rewritten Pod must be refused, judged exactly as validation will judge it.

    Checked before any managed template is created: a rewrite that breaks policy is denied
    here, with validation's own reasons, instead of failing at the template's creation and
    letting the Pod through unchanged on the device plugin. `check` meets the same denial.
    """
    tenant = facts.tenant.name if facts.tenant else ""
    if rewrite.denied:
        reasons = tuple(
            Reason(policy="LegacyResourceMapping", message=m, tenant=tenant) for m in rewrite.denied
        )
        return Decision(allowed=False, reasons=reasons, tenant=tenant)
    if not rewrite.templates:
        return None
    made = {str(t["metadata"]["name"]): t for t in rewrite.templates}
    judged = evaluate(
        request.with_object(rewrite.rewritten()),
        policies,
        facts.with_templates({**facts.templates, **made}),
        deadline,
    )
    if judged.allowed:
        return None
    return replace(judged, warnings=(*rewrite.notes, *judged.warnings), holds={})
