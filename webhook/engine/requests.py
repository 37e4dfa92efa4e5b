"""Checks on one device request: allowed classes, admin access, DeviceClassPolicy rules, and
whether the class it names exists.

Each check returns findings rather than raising, so one admission reports every problem at
once and a person fixes a manifest in one round trip.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace

from webhook.engine.rules import RuleInputs, failed_rules, memoizable
from webhook.types import (
    ADMIN_ACCESS_LABEL,
    Action,
    AllocationMode,
    DeviceClassPolicy,
    DeviceRequest,
    FailurePolicy,
    PolicySet,
    Reason,
    Tenant,
    unknown_class,
)


@dataclass(frozen=True)
class Finding:
    """A Deny reason, a warning, or an audit note produced by a check."""

    action: Action
    reason: Reason


def check_request(
    request: DeviceRequest,
    *,
    policies: PolicySet,
    tenant: Tenant | None,
    namespace_labels: dict[str, str],
    inputs: RuleInputs,
    prefix: str = "",
) -> list[Finding]:
    """Every finding for each class the request (or one of its alternatives) may use.

    A list, built with plain calls: most requests have no finding, and every review checks
    each of its requests, so the checks that find nothing should cost next to nothing."""
    found: list[Finding] = []
    for leaf in request.leaves():
        found.extend(_remembered(leaf, policies, tenant, namespace_labels, inputs, prefix=prefix))
    return found


MAX_FINDINGS_PER_REQUEST = 64
"""(prefix, label) entries one request's memo keeps; past this it starts over."""


def _remembered(
    leaf: DeviceRequest,
    policies: PolicySet,
    tenant: Tenant | None,
    labels: dict[str, str],
    inputs: RuleInputs,
    *,
    prefix: str,
) -> Sequence[Finding]:
    """`_leaf_findings`, remembered in the leaf's rules memo (one per request, tenant name and
    operation) when every class policy that applies has only request-only rules.

    What else the findings read is the key or is checked: the prefix, the namespace's
    admin-access label (read only for an adminAccess request), and the class policies and
    tenant objects themselves (kept, and compared by identity: a reload makes new ones).
    Near the review's deadline nothing is remembered or answered from memory."""
    if inputs.near_deadline():
        return _leaf_findings(leaf, policies, tenant, labels, inputs, prefix=prefix)
    memo = inputs.memo_of(leaf).findings
    key = (prefix, labels.get(ADMIN_ACCESS_LABEL) if leaf.admin_access else None)
    found = memo.get(key)
    if found is not None and found[0] is policies.class_policies and found[1] is tenant:
        return found[2]  # type: ignore[no-any-return]
    findings = tuple(_leaf_findings(leaf, policies, tenant, labels, inputs, prefix=prefix))
    applying = (p for p in policies.class_policies if p.applies_to(leaf.device_class))
    if all(memoizable(p.validations) for p in applying) and not inputs.near_deadline():
        if len(memo) >= MAX_FINDINGS_PER_REQUEST:
            memo.clear()
        memo[key] = (policies.class_policies, tenant, findings)
    return findings


def _leaf_findings(
    leaf: DeviceRequest,
    policies: PolicySet,
    tenant: Tenant | None,
    labels: dict[str, str],
    inputs: RuleInputs,
    *,
    prefix: str,
) -> list[Finding]:
    found: list[Finding] = []
    where = f"{prefix}request {leaf.name!r}"
    if tenant is not None and tenant.allowed_device_classes is not None:
        found.extend(_class_allowed(leaf, tenant, where))
    if leaf.admin_access:
        found.extend(_admin_access(leaf, tenant, labels, where))
    for policy in policies.class_policies:
        if policy.applies_to(leaf.device_class):
            found.extend(_class_policy(policy, leaf, inputs, tenant, where))
    return found


def _deny(
    policy: str,
    message: str,
    tenant: Tenant | None,
    leaf: DeviceRequest,
    action: Action = Action.DENY,
    *,
    rule: str = "",
) -> Finding:
    """A broken rule: denied, or under its policy's Warn or Audit enforcement admitted."""
    reason = Reason(
        policy=policy,
        message=message,
        tenant=tenant.name if tenant else "",
        device_class=leaf.device_class,
        rule=rule,
    )
    return Finding(action, reason)


def _class_allowed(leaf: DeviceRequest, tenant: Tenant | None, where: str) -> Iterator[Finding]:
    if tenant is None or tenant.allowed_device_classes is None:
        return
    if leaf.device_class not in tenant.allowed_device_classes:
        allowed = ", ".join(sorted(tenant.allowed_device_classes)) or "none"
        yield _deny(
            f"Tenant/{tenant.name}",
            f"{where}: tenant {tenant.name!r} may not use device class "
            f"{leaf.device_class!r} (allowed: {allowed})",
            tenant,
            leaf,
            tenant.enforcement,
            rule="allowedDeviceClasses",
        )


def _admin_access(
    leaf: DeviceRequest, tenant: Tenant | None, labels: dict[str, str], where: str
) -> Iterator[Finding]:
    if not leaf.admin_access:
        return
    if tenant is not None and not tenant.admin_access:
        yield _deny(
            f"Tenant/{tenant.name}",
            f"{where}: adminAccess is not allowed for tenant {tenant.name!r}",
            tenant,
            leaf,
            tenant.enforcement,
            rule="adminAccess",
        )
    if labels.get(ADMIN_ACCESS_LABEL) != "true":
        yield _deny(
            "admin-access",
            f"{where}: adminAccess requires the label {ADMIN_ACCESS_LABEL}=true on the namespace",
            tenant,
            leaf,
        )


def _class_policy(
    policy: DeviceClassPolicy,
    leaf: DeviceRequest,
    inputs: RuleInputs,
    tenant: Tenant | None,
    where: str,
) -> list[Finding]:
    limit = policy.max_count_per_request
    over = (
        limit is not None
        and leaf.allocation_mode == AllocationMode.EXACT_COUNT
        and leaf.count > limit
    )
    all_refused = (
        leaf.allocation_mode == AllocationMode.ALL and not policy.allow_allocation_mode_all
    )
    failures = failed_rules(policy.validations, leaf, inputs)
    if failures and policy.failure_policy is not FailurePolicy.FAIL:
        failures = [failure.under(policy.failure_policy) for failure in failures]
    if not over and not all_refused and not failures:
        return []  # the common case: no message to build
    name = f"DeviceClassPolicy/{policy.name}"
    found = []
    if over:
        finding = _deny(
            name,
            f"{where}: asks for {leaf.count} devices of class "
            f"{leaf.device_class!r}, at most {limit} per request",
            tenant,
            leaf,
            policy.enforcement,
            rule="maxCountPerRequest",
        )
        found.append(
            replace(finding, reason=replace(finding.reason, limit=limit, requested=leaf.count))
        )
    if all_refused:
        found.append(
            _deny(
                name,
                f"{where}: allocationMode All is not allowed for class {leaf.device_class!r}",
                tenant,
                leaf,
                policy.enforcement,
                rule="allowAllocationModeAll",
            )
        )
    for failure in failures:  # each with its own action, or the policy's enforcement
        rule = f"validations[{policy.validations.index(failure.validation)}]"
        message = f"{where}: {failure.describe()}"
        found.append(_deny(name, message, tenant, leaf, failure.action, rule=rule))
    return found


def unknown_classes(
    requests: Sequence[DeviceRequest], known: Collection[str], prefix: str = ""
) -> Iterator[Finding]:
    """A warning, never a denial, for each request or subrequest naming a DeviceClass the
    cluster does not have: the API server accepts it and the claim is never allocated. The
    cluster may be about to get the class (a driver being installed), so it is only said."""
    if not known:
        return
    for leaf in (leaf for request in requests for leaf in request.leaves()):
        unknown = unknown_class(leaf.device_class, known)
        if unknown is not None:
            message = f"{prefix}request {leaf.name!r}: {unknown}"
            yield Finding(Action.WARN, Reason(policy="device-class", message=message))
