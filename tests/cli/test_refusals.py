"""A webhook's denial as a controller's FailedCreate event quotes it, read back reason by
reason with the policy and rule each names."""

from __future__ import annotations

import pytest

from webhook.cli.refusals import denials
from webhook.pipeline.audit import rule_of

WEBHOOK = 'Error creating: admission webhook "validate.dragate.io" denied the request: '
QUOTA = ("tenant 'ml' quota for gpu.nvidia.com exceeded: used 2 + requested 2 > limit 2; "
         "held by pod:ml/holder/gpu (2)")  # fmt: skip

DENIAL_CASES = {
    "one reason": (f"{WEBHOOK}[Tenant/ml] {QUOTA}", [("Tenant/ml", QUOTA)]),
    "two reasons": (f"{WEBHOOK}[Tenant/ml] {QUOTA}; [DeviceClassPolicy/gpu] no MIG here",
                    [("Tenant/ml", QUOTA), ("DeviceClassPolicy/gpu", "no MIG here")]),
    "more reasons than shown": (f"{WEBHOOK}[Settings] no tenant; and 3 more reasons",
                                [("Settings", "no tenant")]),
    "another webhook's denial": ("Error creating: pods \"x\" is forbidden: exceeded quota", []),
}  # fmt: skip


@pytest.mark.parametrize("case", DENIAL_CASES, ids=list(DENIAL_CASES))
def test_denials_are_read_reason_by_reason(case: str) -> None:
    text, expected = DENIAL_CASES[case]
    assert denials(text) == expected


@pytest.mark.parametrize(
    ("policy", "rule"),
    [("Tenant/ml", "quota"), ("DeviceClassPolicy/gpu", "rules"), ("dragate/feasibility",
      "feasibility"), ("Settings", "Settings")],
    ids=["tenant", "device-class-policy", "own-check", "no-name"],
)  # fmt: skip
def test_a_reason_names_its_rule_as_the_policy_report_does(policy: str, rule: str) -> None:
    assert rule_of(policy) == rule
