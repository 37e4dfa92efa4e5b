"""The one way through: request -> facts gathered once -> pure evaluation -> verdict.

The webhook's `/validate` and `/mutate`, `dragate check` and `dragate test` all call `review`,
so the cluster and CI can never disagree. The pipeline is the only place that combines the
pure layers (engine, rewrite) with the adapters (cluster state, ledger): it reads facts once,
evaluates, and on an allowed CREATE asks the ledger to hold the devices atomically.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from webhook.engine import evaluate, namespace_labels, resolve_tenant
from webhook.engine.counting import add_charges, devices_by_class
from webhook.engine.feasibility import check_claim
from webhook.engine.inventory import ClassCapacity, Inventory
from webhook.engine.normalize import ObjectError, pod_claims, template_claim_spec
from webhook.engine.prediction import PREDICTED_KINDS, demand, fit_warnings
from webhook.engine.quota import limits_of
from webhook.rewrite import rewrite_object
from webhook.rewrite.patch import make_patch
from webhook.types import (
    Action,
    AdmissionRequest,
    ClaimSpec,
    ClusterState,
    Deadline,
    DeadlineExceeded,
    Decision,
    Facts,
    FactsUnavailable,
    Ledger,
    Object,
    Operation,
    PolicySet,
    Reason,
    RewriteResult,
    Settings,
    Verdict,
)

TemplateSink = Callable[[str, Sequence[Object], bool], None]
"""Makes sure managed ResourceClaimTemplates exist: (namespace, templates, dry_run)."""


@dataclass(frozen=True)
class Context:
    """What a review needs besides the request; built once per process by the caller."""

    policies: Callable[[], PolicySet]
    state: ClusterState
    ledger: Ledger
    templates: TemplateSink | None = None
    inventory: Callable[[], Inventory | None] | None = None


def review(
    request: AdmissionRequest,
    context: Context,
    *,
    mutate: bool = False,
    deadline: Deadline | None = None,
) -> Verdict:
    """Judge (or, with `mutate`, rewrite) one admission request.

    Runs in the caller's thread. `deadline` is handed to every step that may block and checked
    before every step that changes state: past it, DeadlineExceeded is raised and nothing has
    been reserved or created (the webhook answers its timeout verdict).
    """
    deadline = deadline or Deadline.never()
    policies = context.policies()
    if exempt(request, policies.settings):
        return Verdict(Decision(audit={"exempt": "namespace or service account is exempt"}))
    try:
        if mutate:
            return _mutate(request, policies, context, deadline)
        return _validate(request, policies, context, deadline)
    except UNREADABLE as err:
        return Verdict(_unreadable(err, mutate=mutate))


UNREADABLE = (TypeError, AttributeError, KeyError, ValueError, IndexError, RecursionError)
"""What a malformed object (a list where a map belongs, 900 levels of nesting, ...) provokes in
code that reads it. Such an object gets an explicit answer, not an HTTP 500: under
`failurePolicy: Ignore` a 500 would admit it unchecked."""


def _unreadable(err: Exception, *, mutate: bool) -> Decision:
    """Validation denies what it could not read; mutation leaves it unchanged and says so."""
    what = (
        "it nests too deeply"
        if isinstance(err, RecursionError)
        else f"{type(err).__name__}: {str(err)[:200]}"
    )
    if mutate:
        return Decision(warnings=(f"dragate: object not rewritten, it could not be read ({what})",))
    reason = Reason(
        policy="dragate/unreadable-object",
        message=f"the object could not be checked ({what}); denied rather than admitted unchecked",
    )
    return Decision(allowed=False, reasons=(reason,))


@dataclass(frozen=True)
class Applied:
    """What `kubectl apply` would meet: the mutation, then validation of the mutated object."""

    mutation: Verdict
    validation: Verdict | None
    final: Object

    @property
    def decision(self) -> Decision:
        return self.validation.decision if self.validation else self.mutation.decision

    @property
    def warnings(self) -> tuple[str, ...]:
        later = self.validation.decision.warnings if self.validation else ()
        return (*self.mutation.decision.warnings, *later)


def admit(request: AdmissionRequest, context: Context) -> Applied:
    """Mutate, then validate the mutated object, as the API server chains the two webhooks."""
    mutation = review(request, context, mutate=True)
    final = mutation.patched if mutation.patched is not None else (request.object or {})
    if not mutation.allowed:
        return Applied(mutation, None, final)
    return Applied(mutation, review(replace(request, object=final), context), final)


def exempt(request: AdmissionRequest, settings: Settings) -> bool:
    """Cluster plumbing named in Settings is never checked nor rewritten."""
    user = str(request.user_info.get("username", ""))
    return (
        request.namespace in settings.exempt_namespaces or user in settings.exempt_service_accounts
    )


def gather(request: AdmissionRequest, policies: PolicySet, context: Context) -> Facts:
    """Every fact the engine may need for `request`, read once."""
    state = context.state
    namespace = state.namespace(request.namespace) if request.namespace else None
    labels = namespace_labels(namespace, request.namespace)
    tenant = resolve_tenant(policies, request.namespace, labels) if request.namespace else None
    facts = Facts(
        namespace=namespace,
        tenant=tenant,
        templates=_templates(request, state),
        device_classes=state.device_classes(),
    )
    inventory = context.inventory() if context.inventory is not None else None
    return _with_inventory(facts, inventory) if inventory is not None else facts


def _with_inventory(facts: Facts, inventory: Inventory) -> Facts:
    """What the published devices add: `All` counted exactly, and unsatisfiable requests."""
    classes = facts.device_classes

    def problems(spec: ClaimSpec) -> list[str]:
        return [r.message for r in check_claim(inventory, spec, classes) if not r.ok]

    capacity = ClassCapacity(inventory, classes)
    return replace(facts, class_capacity=capacity, feasibility=problems)


def _templates(request: AdmissionRequest, state: ClusterState) -> dict[str, Object]:
    if request.kind != "Pod" or request.object is None:
        return {}
    try:
        names = {c.template_name for c in pod_claims(request.object) if c.template_name}
    except ObjectError:
        return {}  # the engine reports the shape problem
    found = {name: state.template(request.namespace, name) for name in names}
    return {name: template for name, template in found.items() if template is not None}


def _validate(
    request: AdmissionRequest, policies: PolicySet, context: Context, deadline: Deadline
) -> Verdict:
    try:
        return _validate_with_facts(request, policies, context, deadline)
    except FactsUnavailable as err:
        _out_of_time(deadline, err)
        return Verdict(_unavailable(request, policies.settings, err))


DEADLINE_SLACK = 0.01
"""A store's wait cut short by the deadline ends this close to it (timers are coarse)."""


def _out_of_time(deadline: Deadline, err: FactsUnavailable) -> None:
    """A store that gave up because the review's own time ran out is a timeout, not an outage."""
    if deadline.remaining() <= DEADLINE_SLACK:
        raise DeadlineExceeded(f"deadline passed while waiting: {err}") from err


def _unavailable(request: AdmissionRequest, settings: Settings, err: FactsUnavailable) -> Decision:
    """The explicit outcome when facts cannot be had: fail closed unless Settings say Warn."""
    message = f"cluster state unavailable, quota cannot be checked: {err}"
    if settings.when_state_unavailable == Action.WARN:
        return Decision(warnings=(f"dragate: {message}; admitted without a quota check",))
    reason = Reason(policy="Settings/whenStateUnavailable", message=f"{message}; retry later")
    return Decision(allowed=False, reasons=(reason,))


def _validate_with_facts(
    request: AdmissionRequest, policies: PolicySet, context: Context, deadline: Deadline
) -> Verdict:
    facts = gather(request, policies, context)
    legacy = _legacy_pod_denial(request, policies, facts)
    if legacy is not None:
        return Verdict(legacy)
    if facts.tenant is not None and _needs_usage(request):
        deadline.check("reading the tenant's usage")
        facts = replace(facts, usage=context.ledger.usage(facts.tenant.name, deadline))
    decision = evaluate(request, policies, facts, deadline)
    if (request.group, request.kind) in PREDICTED_KINDS:
        decision = replace(decision, warnings=_predictions(request, policies, context, facts))
    if not decision.allowed or not decision.holds or facts.tenant is None or request.dry_run:
        return Verdict(decision)
    deadline.check("reserving quota")
    limits = limits_of(facts.tenant)
    reservation = context.ledger.reserve(facts.tenant.name, decision.holds, limits, deadline)
    if reservation.granted:
        return Verdict(decision)
    return Verdict(_refused(request, policies, replace(facts, usage=reservation.usage)))


def _needs_usage(request: AdmissionRequest) -> bool:
    """Whether the tenant's usage must be read before judging.

    A real CREATE is judged optimistically: the ledger's atomic reserve is the check that
    counts, and when it refuses, the request is judged again with the usage that refused it
    (`_refused`), so the denial still names the numbers and the holders. A dry run writes
    nothing, and a workload's fit is predicted against usage, so those read it first.
    """
    return request.dry_run or (request.group, request.kind) in PREDICTED_KINDS


def _predictions(
    request: AdmissionRequest, policies: PolicySet, context: Context, facts: Facts
) -> tuple[str, ...]:
    """Warnings when a workload's Pods would not fit its tenant's remaining quota."""
    if facts.tenant is None or request.object is None or request.operation == Operation.DELETE:
        return ()
    rewritten = rewrite_object(request.object, policies.mappings, namespace=request.namespace)
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


def _mutate(
    request: AdmissionRequest, policies: PolicySet, context: Context, deadline: Deadline
) -> Verdict:
    obj = request.object
    if request.kind != "Pod" or request.operation != Operation.CREATE or obj is None:
        return Verdict(Decision())
    if request.sub_resource:
        return Verdict(Decision())
    try:
        return _rewrite(request, policies, context, obj, deadline)
    except FactsUnavailable as err:
        _out_of_time(deadline, err)
        warning = f"dragate: legacy GPU resources not rewritten, cluster state unavailable: {err}"
        return Verdict(Decision(warnings=(warning,)))


def _rewrite(
    request: AdmissionRequest,
    policies: PolicySet,
    context: Context,
    obj: Object,
    deadline: Deadline,
) -> Verdict:
    facts = gather(request, policies, context)
    result = _rewritten(request, policies, facts)
    denial = _rewrite_denial(request, policies, facts, result)
    if denial is not None:
        return Verdict(denial)
    if result.templates and context.templates is not None:
        deadline.check("creating ResourceClaimTemplates")
        context.templates(request.namespace, result.templates, request.dry_run)
    return Verdict(
        Decision(warnings=result.notes, tenant=facts.tenant.name if facts.tenant else ""),
        patch=_patch(obj, result.object) if result.changed else (),
        patched=result.object if result.changed else None,
    )


def _rewritten(request: AdmissionRequest, policies: PolicySet, facts: Facts) -> RewriteResult:
    return rewrite_object(
        request.object or {},
        policies.mappings,
        native_resources=_native_resources(facts),
        action_override=facts.tenant.mapping_action if facts.tenant else None,
        namespace=request.namespace,
    )


def _rewrite_denial(
    request: AdmissionRequest, policies: PolicySet, facts: Facts, result: RewriteResult
) -> Decision | None:
    """Why the rewritten Pod must be refused, judged exactly as validation will judge it.

    Checked before any managed template is created: a rewrite that breaks policy is denied
    here, with validation's own reasons, instead of failing at the template's creation and
    letting the Pod through unchanged on the device plugin. `check` meets the same denial.
    """
    tenant = facts.tenant.name if facts.tenant else ""
    if result.denied:
        reasons = tuple(
            Reason(policy="LegacyResourceMapping", message=m, tenant=tenant) for m in result.denied
        )
        return Decision(allowed=False, reasons=reasons, tenant=tenant)
    if not result.templates:
        return None
    made = {str(t["metadata"]["name"]): t for t in result.templates}
    judged = evaluate(
        replace(request, object=result.object),
        policies,
        replace(facts, templates={**facts.templates, **made}),
    )
    if judged.allowed:
        return None
    return replace(judged, warnings=(*result.notes, *judged.warnings), holds={})


def _legacy_pod_denial(
    request: AdmissionRequest, policies: PolicySet, facts: Facts
) -> Decision | None:
    """A legacy Pod that reached validation unchanged (the mutating webhook was skipped, or
    failed open) is judged as its rewrite: it may not bypass the policy by keeping the
    device plugin's resources. Nothing is reserved for it: it holds no DRA claim."""
    if request.kind != "Pod" or request.operation != Operation.CREATE or request.sub_resource:
        return None
    if request.object is None:
        return None
    return _rewrite_denial(request, policies, facts, _rewritten(request, policies, facts))


def _native_resources(facts: Facts) -> frozenset[str]:
    """Extended resources a DeviceClass already serves natively (KEP-5004)."""
    names = (
        (c.get("spec") or {}).get("extendedResourceName") for c in facts.device_classes.values()
    )
    return frozenset(str(n) for n in names if n)


def _patch(old: Object, new: Object) -> list[dict[str, Any]]:
    """Linear in the object's size (jsonpatch's list diff is quadratic in containers)."""
    return make_patch(dict(old), dict(new))


def request_from_object(
    obj: Object,
    *,
    operation: Operation = Operation.CREATE,
    namespace: str = "",
    dry_run: bool = False,
    user_info: dict[str, Any] | None = None,
) -> AdmissionRequest:
    """The AdmissionRequest the API server would send for `obj`: how the CLI enters the pipeline."""
    meta = obj.get("metadata") or {}
    api_version = str(obj.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    kind = str(obj.get("kind", ""))
    return AdmissionRequest(
        uid=str(uuid.uuid4()),
        kind=kind,
        group=group,
        version=version,
        resource=kind.lower() + "s",
        operation=operation,
        namespace=str(
            meta.get("namespace") or namespace or ("default" if _namespaced(kind) else "")
        ),
        name=str(meta.get("name", "")),
        object=obj if operation != Operation.DELETE else None,
        old_object=obj if operation in (Operation.UPDATE, Operation.DELETE) else None,
        dry_run=dry_run,
        user_info=user_info or {"username": "dragate-cli"},
    )


CLUSTER_KINDS = frozenset({"Namespace", "DeviceClass", "ResourceSlice", "Node"})


def _namespaced(kind: str) -> bool:
    return kind not in CLUSTER_KINDS
