"""The engine's single entry point: one request and its facts in, one Decision out.

Pure: everything it knows arrives in `Facts`, gathered once by the pipeline. Nothing here
blocks, reads a file or talks to the API server, so the webhook, `dragate check` and the
benchmarks all measure and trust the same function.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TypeVar

from webhook.engine import claimshapes, normalize, podshapes, published, quota, rules
from webhook.engine.adminlabel import admin_label_reasons
from webhook.engine.contentmemo import claim_spec, template_spec
from webhook.engine.counting import (
    devices_by_class,
    holder_key,
    holder_pod_name,
    pod_holder_key,
    pod_name,
)
from webhook.engine.extended import EXTENDED_CLAIM, pod_special_claim
from webhook.engine.gangs import pod_gang
from webhook.engine.heldmemo import HeldMemo
from webhook.engine.normalize import ClaimRef
from webhook.engine.podshapes import Findings, PodShape
from webhook.engine.requests import Finding, check_request, unknown_classes
from webhook.engine.rules import RuleInputs
from webhook.engine.tenancy import namespace_labels
from webhook.engine.violations import audit_of, is_violation, warnings_of
from webhook.types import (
    Action,
    AdmissionRequest,
    ClaimSpec,
    Deadline,
    Decision,
    Facts,
    PolicySet,
    Reason,
    Violation,
)
from webhook.types.adapters import NEVER
from webhook.types.records import record

T = TypeVar("T")
CLAIM_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "Pod"})
"""Kinds whose creation is judged here (besides Namespaces' labels); `pipeline.scope.handles`
decides which requests reach `evaluate` at all."""


@record
class JudgedClaim:
    """A claim spec the object brings, and the ledger holder charged for it (if any)."""

    spec: ClaimSpec
    holder: str | None
    charges: Mapping[str, int]  # `devices_by_class(spec)`: quota and the holds both need it
    name: str | None = None  # the Pod's `<namespace>/<name>` of a holder keyed by its uid

    @classmethod
    def of(cls, spec: ClaimSpec, holder: str | None, name: str | None = None) -> JudgedClaim:
        return cls(spec, holder, devices_by_class(spec), name)


def evaluate(
    request: AdmissionRequest,
    policies: PolicySet,
    facts: Facts,
    deadline: Deadline | None = None,
) -> Decision:
    """Judge one admission request against the policies, given the facts.

    The request is one the pipeline reviews (`pipeline.scope.handles`): a Namespace, or the
    creation of a claim, claim template or Pod.

    Past `deadline` (checked before each policy rule) it raises DeadlineExceeded: a review
    whose caller has given up stops here rather than spend its CPU on an unwanted answer.
    """
    if request.kind == "Namespace":
        reasons = tuple(admin_label_reasons(request, policies.settings))
        return Decision(allowed=not reasons, reasons=reasons, tenant=_tenant_name(facts))
    try:
        claims, notes, found = _judged(request, policies, facts, deadline)
    except normalize.ObjectError as err:
        return _invalid(err, facts)
    gang = pod_gang(request.object or {}, request.namespace, policies.settings.gang_kinds)
    findings = [*found.before, *_quota_findings(claims, facts, gang), *found.after]
    return _decide(findings, notes, facts, claims)


def _tenant_name(facts: Facts) -> str:
    return facts.tenant.name if facts.tenant else ""


def _invalid(err: normalize.ObjectError, facts: Facts) -> Decision:
    reason = Reason(policy="object", message=f"cannot read the object: {err}")
    return Decision(allowed=False, reasons=(reason,), tenant=_tenant_name(facts))


Judged = tuple[list[JudgedClaim], list[str], Findings]


def _judged(
    request: AdmissionRequest, policies: PolicySet, facts: Facts, deadline: Deadline | None
) -> Judged:
    if request.kind == "Pod":
        return _pod_judged(request, policies, facts, deadline)
    claims = _own_claims(request, policies)
    specs = [claim.spec for claim in claims]
    found = _claim_shape(request, policies, facts, specs, deadline)
    unknown = tuple(_unknown_classes(specs, facts, policies.settings.feasibility))
    return claims, [], Findings(found.before, (*found.after, *unknown)) if unknown else found


def _unknown_classes(
    specs: Sequence[ClaimSpec], facts: Facts, feasibility: Action | None
) -> Iterator[Finding]:
    """Classes the cluster lacks, unless the feasibility check already says so.

    A claim or template only: a Pod's templates were judged when they were created.
    """
    if feasibility is not None and facts.feasibility is not None:
        return
    for spec in specs:
        yield from unknown_classes(spec.requests, facts.device_classes)


def _own_claims(request: AdmissionRequest, policies: PolicySet) -> list[JudgedClaim]:
    obj = request.object or {}
    if request.kind == "ResourceClaim":
        spec = claim_spec(obj, "the claim", policies.memos)  # by content
        return [JudgedClaim.of(spec, holder_key(obj), holder_pod_name(obj))]
    if request.kind == "ResourceClaimTemplate":
        return [JudgedClaim.of(template_spec(obj, "the template", policies.memos), None)]
    return []


def _claim_shape(
    request: AdmissionRequest,
    policies: PolicySet,
    facts: Facts,
    specs: Sequence[ClaimSpec],
    deadline: Deadline | None,
) -> Findings:
    """A claim's or template's findings, remembered for its alike claims when every rule
    reads only the request (`claimshapes`)."""

    def judge() -> Findings:
        inputs = _rule_inputs(request, policies, facts, deadline)
        return _claim_findings(request, policies, facts, specs, inputs)

    table = policies.memos.of(claimshapes.SHAPES)
    entry = claimshapes.shape_key(request, tuple(specs), facts)
    return _remembered(table, entry, policies, deadline, judge=judge, specs_of=lambda _: specs)


def _remembered(
    table: HeldMemo[T],
    entry: tuple[Hashable, tuple[object, ...]],
    policies: PolicySet,
    deadline: Deadline | None,
    *,
    judge: Callable[[], T],
    specs_of: Callable[[T], Sequence[ClaimSpec]],
) -> T:
    """`judge()`, answered from `table` and kept there when every rule that applies to the
    specs it judged reads only the request; near the deadline neither (`rules.near`).
    `entry`: the key, and the objects the answer must come from (`HeldMemo`)."""
    key, held = entry
    near = rules.near(deadline)
    found = None if near else table.get(key, held)
    if found is None:
        found = judge()
        if not near and not rules.near(deadline) and rules.request_only(specs_of(found), policies):
            table.put(key, held, found)
    return found


def _pod_judged(
    request: AdmissionRequest, policies: PolicySet, facts: Facts, deadline: Deadline | None
) -> Judged:
    """A Pod's claims and findings, its shape remembered when every rule reads only the
    request (a Pod's own uid keys its holders, never its findings)."""
    pod = request.object or {}
    refs = normalize.pod_claim_refs(pod)
    extended = pod_special_claim(pod, facts.device_classes)
    key, held = podshapes.shape_key(request, refs, facts)
    key = key if extended is None else (key, extended)

    def judge() -> PodShape:
        inputs = _rule_inputs(request, policies, facts, deadline)  # only now: most need none
        return _pod_shape(request, policies, facts, refs, inputs, extended=extended)

    table = policies.memos.of(podshapes.SHAPES)
    entry = (key, held)
    shape = _remembered(table, entry, policies, deadline, judge=judge, specs_of=_shape_specs)
    meta = pod.get("metadata") or {}
    uid = str(meta.get("uid") or request.uid)
    named = pod_name(request.namespace, meta.get("name") or request.name)
    claims = [
        JudgedClaim(spec, pod_holder_key(uid, name), charges, named)
        for name, spec, charges in shape.claims
    ]
    return claims, list(shape.notes), shape.findings


def _shape_specs(shape: PodShape) -> list[ClaimSpec]:
    return [spec for _, spec, _ in shape.claims]


def _pod_shape(
    request: AdmissionRequest,
    policies: PolicySet,
    facts: Facts,
    refs: tuple[ClaimRef, ...],
    inputs: RuleInputs,
    *,
    extended: ClaimSpec | None,
) -> PodShape:
    """The Pod's template claims, and the claim kube-scheduler will make for its extended
    resources that a DeviceClass maps (KEP-5004), all judged and charged at its CREATE."""
    claims, notes = [], []
    checkpoint = (inputs.deadline or NEVER).checkpoint
    for name, template_name, _, _ in refs:
        checkpoint("reading the Pod's claim templates")
        if template_name is None:
            continue  # an existing claim: judged and charged when it was created
        template = facts.templates.get(template_name)
        if template is None:
            notes.append(
                f"pod claim {name!r}: ResourceClaimTemplate "
                f"{template_name!r} not found; its claim is judged when created"
            )
            continue
        spec = template_spec(template, f"pod claim {name!r}", policies.memos)  # by content
        claims.append((name, spec, MappingProxyType(devices_by_class(spec))))
    if extended is not None:
        claims.append((EXTENDED_CLAIM, extended, MappingProxyType(devices_by_class(extended))))
    specs = [spec for _, spec, _ in claims]
    findings = _claim_findings(request, policies, facts, specs, inputs)
    return PodShape(tuple(claims), tuple(notes), findings)


def _claim_findings(
    request: AdmissionRequest,
    policies: PolicySet,
    facts: Facts,
    specs: Sequence[ClaimSpec],
    inputs: RuleInputs,
) -> Findings:
    tenant = facts.tenant
    labels = namespace_labels(facts.namespace, request.namespace)
    before: list[Finding] = []
    has_requests = any(spec.requests for spec in specs)
    if tenant is None and has_requests and policies.settings.deny_unknown_namespaces:
        message = f"namespace {request.namespace!r} belongs to no tenant; it may not use devices"
        before.append(Finding(Action.DENY, Reason(policy="Settings", message=message)))
    checkpoint = (inputs.deadline or NEVER).checkpoint
    for spec in specs:
        checkpoint("judging claims")
        for device_request in spec.requests:
            before += check_request(
                device_request,
                policies=policies,
                tenant=tenant,
                namespace_labels=labels,
                inputs=inputs,
                prefix=published.prefix(spec),
            )
    after = [
        *published.all_mode_insight(specs, facts),
        *published.feasibility_findings(specs, facts, policies.settings.feasibility),
        *published.binding_findings(specs, facts),
    ]
    return Findings(tuple(before), tuple(after))


def _rule_inputs(
    request: AdmissionRequest, policies: PolicySet, facts: Facts, deadline: Deadline | None
) -> RuleInputs:
    return RuleInputs(
        tenant=_tenant_name(facts),
        operation=request.operation.value,
        sources={
            "object": lambda: request.object,
            "oldObject": lambda: request.old_object,
            "namespace": lambda: facts.namespace,
            "userInfo": lambda: dict(request.user_info),
        },
        memos=policies.memos,
        deadline=deadline,
    )


def _quota_findings(
    claims: list[JudgedClaim], facts: Facts, gang: str | None = None
) -> Iterator[Finding]:
    tenant = facts.tenant
    if tenant is None:
        return
    totals: dict[str, int] = {}
    for claim in claims:
        charges = claim.charges
        for reason in quota.per_claim_reasons(tenant, claim.spec.label, charges):
            yield Finding(tenant.enforcement, reason)
        if claim.holder is not None:
            for device_class, devices in charges.items():
                totals[device_class] = totals.get(device_class, 0) + devices
    replaced = _already_held(claims, facts, gang, totals)
    own = frozenset(claim.holder for claim in claims if claim.holder is not None)
    for reason in quota.total_reasons(tenant, totals, facts.usage, replaced, own):
        yield Finding(tenant.enforcement, reason)


def _already_held(
    claims: list[JudgedClaim], facts: Facts, gang: str | None, totals: dict[str, int]
) -> dict[str, int]:
    """What the object's own holders already hold, and what its gang's holder holds for it
    (a gang's Pod draws its devices from there: up to its own charge)."""
    holders = {claim.holder for claim in claims if claim.holder is not None}
    return {
        device_class: usage.held_by(holders)
        + (min(usage.held_by((gang,)), totals.get(device_class, 0)) if gang else 0)
        for device_class, usage in facts.usage.items()
    }


def _warning(reason: Reason) -> str:
    """A kubectl warning: short (the API server keeps 120 characters), policy last."""
    policy = reason.policy.rpartition("/")[2]
    return f"dragate: {reason.message} ({policy})"


def _decide(
    findings: list[Finding], notes: list[str], facts: Facts, claims: list[JudgedClaim]
) -> Decision:
    denials: tuple[Reason, ...] = ()
    warnings: list[str] = []
    audit: dict[str, str] = {}
    violations: tuple[Violation, ...] = ()
    if findings:  # most reviews find nothing: these passes are not free
        denials = tuple(f.reason for f in findings if f.action == Action.DENY)
        violations = tuple(
            Violation(f.action, f.reason) for f in findings if is_violation(f.action, f.reason)
        )
        warnings = [
            _warning(f.reason)
            for f in findings
            if f.action == Action.WARN and not is_violation(f.action, f.reason)
        ]
        warnings += warnings_of(violations)
        audit = audit_of(violations)
    holds = {
        claim.holder: charges
        for claim in claims
        if claim.holder is not None and (charges := dict(claim.charges))
    }
    names = {c.holder: c.name for c in claims if c.holder in holds and c.name is not None}
    return Decision(
        allowed=not denials,
        reasons=denials,
        warnings=tuple(warnings + notes),
        audit=audit,
        tenant=_tenant_name(facts),
        holds=holds,
        violations=violations,
        names=names,
    )
