"""Checks on one device request: allowed classes, admin access, DeviceClassPolicy rules.

Each check returns findings rather than raising, so one admission reports every problem at
once and a person fixes a manifest in one round trip.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from webhook.engine.rules import RuleInputs, failed_rules
from webhook.types import (
    ADMIN_ACCESS_LABEL,
    Action,
    AllocationMode,
    DeviceClassPolicy,
    DeviceRequest,
    PolicySet,
    Reason,
    Tenant,
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
        where = f"{prefix}request {leaf.name!r}"
        if tenant is not None and tenant.allowed_device_classes is not None:
            found.extend(_class_allowed(leaf, tenant, where))
        if leaf.admin_access:
            found.extend(_admin_access(leaf, tenant, namespace_labels, where))
        for policy in policies.class_policies:
            if policy.applies_to(leaf.device_class):
                found.extend(_class_policy(policy, leaf, inputs, tenant, where))
    return found


def _deny(policy: str, message: str, tenant: Tenant | None, leaf: DeviceRequest) -> Finding:
    reason = Reason(
        policy=policy,
        message=message,
        tenant=tenant.name if tenant else "",
        device_class=leaf.device_class,
    )
    return Finding(Action.DENY, reason)


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
        )
        found.append(
            Finding(Action.DENY, replace(finding.reason, limit=limit, requested=leaf.count))
        )
    if all_refused:
        found.append(
            _deny(
                name,
                f"{where}: allocationMode All is not allowed for class {leaf.device_class!r}",
                tenant,
                leaf,
            )
        )
    for failure in failures:
        finding = _deny(name, f"{where}: {failure.describe()}", tenant, leaf)
        found.append(Finding(failure.action, finding.reason))
    return found
