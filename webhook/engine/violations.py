"""Rules broken under Warn or Audit: how an admitted violation is told and recorded.

A Tenant's or DeviceClassPolicy's `enforcement` (and a validation's own `action`) may admit
an object that breaks a rule. The object is then told what a denial would have said. Under
Warn as kubectl warnings worded as dragate's others (message first, policy name last, since
a warning is cut at 120 characters) and tagged: `dragate: [Warn] <message> (<policy>)`, with
a denial's holders on a warning of their own, `dragate: [Warn] <Kind/policy>: <class> held
by ...`. Under Audit as an audit annotation per policy, `<kind>-<name>`, which the API server
stores as `<webhook name>/<kind>-<name>` (`claims.validate.dragate.io/tenant-team-a`), its
value the denial's reasons. Both are kept whole as `Violation`s for the metrics.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.types import Action, Reason, Violation

POLICY_KINDS = ("Tenant/", "DeviceClassPolicy/")
"""Reasons of these policies are rule violations; other warnings (feasibility, the `All`
insight) are information, not violations."""
HELD_BY = "; held by "


def is_violation(action: Action, reason: Reason) -> bool:
    """Whether a finding is a policy rule broken and admitted (Warn or Audit)."""
    return action != Action.DENY and reason.policy.startswith(POLICY_KINDS)


def warnings_of(violations: Iterable[Violation]) -> list[str]:
    """The kubectl warnings of the Warn violations, each recognisable by its `[Warn]`."""
    warnings = []
    for violation in violations:
        if violation.mode != Action.WARN:
            continue
        reason = violation.reason
        message, _, held_by = reason.message.partition(HELD_BY)
        warnings.append(f"dragate: [Warn] {message} ({violation.policy_name})")
        if held_by:
            where = f"{reason.policy}: {reason.device_class}".rstrip()
            warnings.append(f"dragate: [Warn] {where} held by {held_by}")
    return warnings


def audit_of(violations: Iterable[Violation]) -> dict[str, str]:
    """The audit annotations of the Audit violations: one per policy, its reasons joined."""
    audit: dict[str, str] = {}
    for violation in violations:
        if violation.mode != Action.AUDIT:
            continue
        key = f"{violation.policy_kind.lower()}-{violation.policy_name}"
        text = str(violation.reason)
        audit[key] = f"{audit[key]}; {text}" if key in audit else text
    return audit
