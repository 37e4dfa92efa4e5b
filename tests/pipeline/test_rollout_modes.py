"""Rollout modes through the pipeline: a Tenant's or DeviceClassPolicy's `enforcement`.

Deny refuses as always; Warn and Audit admit the object, tell (warnings) or record (audit
annotations, violations) what the denial would have said, and charge its devices to the
ledger all the same, over the limit too.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import claim, exact, pod, request, template

from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context, request_from_object, review
from webhook.policy.loading import parse_policies
from webhook.types import Action, PolicySet, Verdict

GPU = "gpu.nvidia.com"


def policies(tenant_mode: str = "Deny", class_mode: str = "Deny") -> PolicySet:
    return parse_policies(
        f"""
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: team-a}}
spec:
  namespaces: [team-a]
  enforcement: {tenant_mode}
  quota:
  - {{deviceClassName: {GPU}, maxDevices: 4, maxDevicesPerClaim: 3}}
---
apiVersion: dragate.io/v1alpha1
kind: DeviceClassPolicy
metadata: {{name: gpu-limits}}
spec:
  deviceClassNames: [{GPU}]
  enforcement: {class_mode}
  maxCountPerRequest: 8
  validations:
  - expression: "request.count != 5"
    message: five GPUs are not a shape we offer
  - expression: "request.count != 6"
    message: six GPUs are never allowed
    action: Deny
""",
        "inline.yaml",
    )


def reviewed(
    policy_set: PolicySet, *counts: int, held: int = 0
) -> tuple[list[Verdict], MemoryLedger]:
    """Each count as a claim of its own, in order, after `held` devices already held."""
    ledger = MemoryLedger({"team-a": {"claim:team-a/old": {GPU: held}}} if held else None)
    context = Context(policies=lambda: policy_set, state=SnapshotState(), ledger=ledger)
    verdicts = [
        review(request_from_object(claim(request(exact(count=n)), name=f"c{i}")), context)
        for i, n in enumerate(counts)
    ]
    return verdicts, ledger


def violations(verdict: Verdict) -> list[tuple[str, str]]:
    return [(v.mode.value, v.reason.policy) for v in verdict.decision.violations]


OVER_QUOTA = "used 3 + requested 2 > limit 4"


@pytest.mark.parametrize(
    ("mode", "allowed", "used"),
    [("Deny", False, 3), ("Warn", True, 5), ("Audit", True, 5)],
    ids=["deny-refuses", "warn-admits-and-charges", "audit-admits-and-charges"],
)
def test_tenant_enforcement_over_quota(mode: str, allowed: bool, used: int) -> None:
    (verdict,), ledger = reviewed(policies(tenant_mode=mode), 2, held=3)
    assert verdict.allowed is allowed
    assert ledger.usage("team-a")[GPU].used == used  # over the limit, recorded as held
    if mode == "Deny":
        assert OVER_QUOTA in verdict.decision.reasons[0].message
        assert not verdict.decision.violations
        return
    assert violations(verdict) == [(mode, "Tenant/team-a")]
    (violation,) = verdict.decision.violations
    reason = violation.reason
    assert (reason.used, reason.limit, reason.requested) == (3, 4, 2)
    assert reason.holders == ("claim:team-a/old (3)",)


def test_tenant_warn_tells_the_numbers_and_the_holders_as_warnings() -> None:
    (verdict,), _ = reviewed(policies(tenant_mode="Warn"), 2, held=3)
    assert verdict.decision.warnings == (
        f"dragate: [Warn] tenant 'team-a' quota for {GPU} exceeded: {OVER_QUOTA} (team-a)",
        f"dragate: [Warn] Tenant/team-a: {GPU} held by claim:team-a/old (3)",
    )
    assert not verdict.decision.audit


def test_tenant_audit_records_an_annotation_with_the_numbers_and_no_warning() -> None:
    (verdict,), _ = reviewed(policies(tenant_mode="Audit"), 2, held=3)
    assert not verdict.decision.warnings
    (key, value), *_ = verdict.decision.audit.items()
    assert key == "tenant-team-a"
    assert OVER_QUOTA in value and "held by claim:team-a/old (3)" in value


@pytest.mark.parametrize(
    ("mode", "allowed"),
    [("Deny", False), ("Warn", True), ("Audit", True)],
    ids=["deny", "warn", "audit"],
)
def test_tenant_per_claim_limit_follows_the_enforcement(mode: str, allowed: bool) -> None:
    (verdict,), ledger = reviewed(policies(tenant_mode=mode), 4)
    assert verdict.allowed is allowed
    message = "asks for 4 gpu.nvidia.com devices; tenant 'team-a' allows at most 3 per claim"
    found = [r.message for r in verdict.decision.reasons] + [
        v.reason.message for v in verdict.decision.violations
    ]
    assert any(message in text for text in found)
    charged = ledger.usage("team-a").get(GPU)
    assert (charged.used if charged else 0) == (4 if allowed else 0)


def test_a_warn_tenant_keeps_being_admitted_and_charged_past_its_limit() -> None:
    verdicts, ledger = reviewed(policies(tenant_mode="Warn"), 3, 1, 2)
    assert all(v.allowed for v in verdicts)
    assert [bool(v.decision.violations) for v in verdicts] == [False, False, True]
    assert ledger.usage("team-a")[GPU].used == 6


@pytest.mark.parametrize(
    ("mode", "count", "allowed", "expected"),
    [
        ("Deny", 9, False, []),
        ("Warn", 9, True, [("Warn", "DeviceClassPolicy/gpu-limits")]),
        ("Audit", 9, True, [("Audit", "DeviceClassPolicy/gpu-limits")]),
        ("Deny", 5, False, []),
        ("Warn", 5, True, [("Warn", "DeviceClassPolicy/gpu-limits")]),
        ("Audit", 5, True, [("Audit", "DeviceClassPolicy/gpu-limits")]),
        ("Audit", 6, False, []),
        ("Warn", 6, False, []),
    ],
    ids=[
        "max-count-deny",
        "max-count-warn",
        "max-count-audit",
        "validation-without-action-deny",
        "validation-without-action-warn",
        "validation-without-action-audit",
        "validation-own-deny-under-audit",
        "validation-own-deny-under-warn",
    ],
)
def test_class_policy_enforcement(
    mode: str, count: int, allowed: bool, expected: list[tuple[str, str]]
) -> None:
    warn_tenant = policies(tenant_mode="Warn", class_mode=mode)  # its quota only warns
    (verdict,), _ = reviewed(warn_tenant, count)
    assert verdict.allowed is allowed
    broken = [v for v in violations(verdict) if v[1].startswith("DeviceClassPolicy/")]
    assert broken == expected
    if not allowed:
        assert [r.policy for r in verdict.decision.reasons] == ["DeviceClassPolicy/gpu-limits"]


@pytest.mark.parametrize(
    ("mode", "warned", "audited"),
    [("Warn", True, False), ("Audit", False, True)],
    ids=["warn", "audit"],
)
def test_class_policy_violation_is_told_or_recorded(mode: str, warned: bool, audited: bool) -> None:
    (verdict,), _ = reviewed(policies(tenant_mode="Warn", class_mode=mode), 5)
    decision = verdict.decision
    told = [w for w in decision.warnings if "five GPUs are not a shape we offer" in w]
    assert told == (
        ["dragate: [Warn] request 'gpu': five GPUs are not a shape we offer (gpu-limits)"]
        if warned
        else []
    )
    recorded: dict[str, str] = dict(decision.audit)
    assert ("deviceclasspolicy-gpu-limits" in recorded) is audited
    modes = {v.mode for v in decision.violations if v.policy_kind == "DeviceClassPolicy"}
    assert modes == {Action(mode)}


class CountingLedger(MemoryLedger):
    """A MemoryLedger that counts the usage reads."""

    reads = 0

    def usage(self, tenant: str, deadline: Any = None) -> Any:
        self.reads += 1
        return super().usage(tenant, deadline)


@pytest.mark.parametrize(
    ("claims", "reads", "warned"),
    [({"gpu": "two"}, 1, True), ({}, 0, False)],
    ids=["pod-with-a-claim-is-judged-against-usage", "pod-without-claims-reads-nothing"],
)
def test_warn_tenant_pods(claims: dict[str, str], reads: int, warned: bool) -> None:
    ledger = CountingLedger({"team-a": {"claim:team-a/old": {GPU: 3}}})
    state = SnapshotState([template(request(exact(count=2)), name="two")])
    warn = policies(tenant_mode="Warn")
    context = Context(policies=lambda: warn, state=state, ledger=ledger)
    verdict = review(request_from_object(pod("train-0", claims=claims, uid="u-0")), context)
    assert verdict.allowed
    assert ledger.reads == reads
    assert any(OVER_QUOTA in w for w in verdict.decision.warnings) is warned
