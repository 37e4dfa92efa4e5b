"""How a rule broken under Warn or Audit is told (warnings) and recorded (audit)."""

from __future__ import annotations

import pytest

from webhook.engine.violations import audit_of, is_violation, warnings_of
from webhook.types import Action, Reason, Violation

QUOTA = Reason(
    policy="Tenant/team-a",
    message="tenant 'team-a' quota for gpu exceeded: used 3 + requested 2 > limit 4; "
    "held by claim:team-a/old (3)",
    tenant="team-a",
    device_class="gpu",
    used=3,
    limit=4,
    requested=2,
    holders=("claim:team-a/old (3)",),
)
RULE = Reason(policy="DeviceClassPolicy/gpu", message="request 'gpu': too many", device_class="gpu")
OTHER_RULE = Reason(policy="DeviceClassPolicy/gpu", message="request 'b': bad shape")


@pytest.mark.parametrize(
    ("action", "reason", "expected"),
    [
        (Action.WARN, RULE, True),
        (Action.AUDIT, QUOTA, True),
        (Action.DENY, QUOTA, False),
        (Action.WARN, Reason(policy="feasibility", message="no node fits"), False),
        (Action.WARN, Reason(policy="quota", message="All is charged 32"), False),
    ],
    ids=["warn-rule", "audit-quota", "deny-is-a-denial", "feasibility", "all-mode-insight"],
)
def test_what_is_a_violation(action: Action, reason: Reason, expected: bool) -> None:
    assert is_violation(action, reason) is expected


@pytest.mark.parametrize(
    ("violations", "expected"),
    [
        (
            [Violation(Action.WARN, QUOTA)],
            [
                "dragate: [Warn] tenant 'team-a' quota for gpu exceeded: "
                "used 3 + requested 2 > limit 4 (team-a)",
                "dragate: [Warn] Tenant/team-a: gpu held by claim:team-a/old (3)",
            ],
        ),
        (
            [Violation(Action.WARN, RULE)],
            ["dragate: [Warn] request 'gpu': too many (gpu)"],
        ),
        ([Violation(Action.AUDIT, RULE)], []),
    ],
    ids=["quota-with-holders", "rule", "audit-is-not-told"],
)
def test_warnings(violations: list[Violation], expected: list[str]) -> None:
    assert warnings_of(violations) == expected


@pytest.mark.parametrize(
    ("violations", "expected"),
    [
        ([Violation(Action.AUDIT, QUOTA)], {"tenant-team-a": str(QUOTA)}),
        (
            [Violation(Action.AUDIT, RULE), Violation(Action.AUDIT, OTHER_RULE)],
            {"deviceclasspolicy-gpu": f"{RULE}; {OTHER_RULE}"},
        ),
        ([Violation(Action.WARN, RULE)], {}),
    ],
    ids=["one-per-policy", "reasons-of-one-policy-joined", "warn-is-not-recorded"],
)
def test_audit_annotations(violations: list[Violation], expected: dict[str, str]) -> None:
    assert audit_of(violations) == expected
