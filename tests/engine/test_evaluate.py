"""The engine's decisions: classes, admin access, class policies, CEL rules, quota."""

from __future__ import annotations

from typing import Any

import pytest
from builders import claim, exact, first_available, namespace, pod, request, template

from webhook.engine import evaluate
from webhook.engine.cel import compile_expression
from webhook.types import (
    Action,
    AdmissionRequest,
    ClassUsage,
    DeviceClassPolicy,
    Facts,
    FailurePolicy,
    Holder,
    Operation,
    PolicySet,
    QuotaLimit,
    Settings,
    Tenant,
    Validation,
)

RULE_VARIABLES = ("request", "object", "oldObject", "namespace", "tenant", "operation", "userInfo")


def rule(expression: str, message: str, action: Action = Action.DENY) -> Validation:
    program = compile_expression(expression, variables=RULE_VARIABLES)
    return Validation(expression, message, action, program)


TEAM_A = Tenant(
    "team-a",
    namespaces=frozenset({"team-a"}),
    allowed_device_classes=frozenset({"gpu.nvidia.com", "mig.nvidia.com"}),
    quota=(
        QuotaLimit("gpu.nvidia.com", max_devices=8, max_devices_per_claim=4),
        QuotaLimit("mig.nvidia.com", max_devices=2),
    ),
)
ADMINS = Tenant("admins", namespaces=frozenset({"ops"}), admin_access=True)
GUARDRAILS = DeviceClassPolicy(
    "gpu-guardrails",
    frozenset({"gpu.nvidia.com"}),
    max_count_per_request=4,
    allow_allocation_mode_all=False,
    validations=(
        rule(
            "request.selectors.all(s, !s.contains('uuid'))",
            "pinning devices by UUID is not allowed",
        ),
        rule("request.count <= 2", "more than two GPUs is unusual", Action.WARN),
        rule("tenant != 'team-a'", "team-a GPU request", Action.AUDIT),
    ),
)
POLICIES = PolicySet(tenants=(TEAM_A, ADMINS), class_policies=(GUARDRAILS,))


def admission(obj: dict[str, Any], operation: Operation = Operation.CREATE) -> AdmissionRequest:
    meta = obj.get("metadata", {})
    return AdmissionRequest(
        uid="uid-1",
        kind=obj["kind"],
        group="",
        version="v1",
        resource="x",
        operation=operation,
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        object=obj,
    )


def facts(tenant: Tenant | None = TEAM_A, used: int = 0, **extra: Any) -> Facts:
    usage = (
        {"gpu.nvidia.com": ClassUsage(used, (Holder("claim:team-a/old", used),))} if used else {}
    )
    return Facts(tenant=tenant, usage=usage, **extra)


def messages(obj: dict[str, Any], given: Facts, policies: PolicySet = POLICIES) -> list[str]:
    return [r.message for r in evaluate(admission(obj), policies, given).reasons]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (claim(request(exact(count=2))), []),
        (
            claim(request(exact(device_class="tpu.google.com"))),
            ["may not use device class 'tpu.google.com'"],
        ),
        (claim(request(exact(count=5))), ["at most 4 per request", "allows at most 4 per claim"]),
        (
            claim(request(exact(count=None, mode="All"))),
            ["allocationMode All is not allowed", "per claim", "used 0 + requested 32 > limit 8"],
        ),
        (
            claim(
                request(exact(selectors=("device.attributes['gpu.nvidia.com'].uuid == 'GPU-1'",)))
            ),
            ["pinning devices by UUID is not allowed"],
        ),
        (
            claim(request(exact(admin=True))),
            [
                "adminAccess is not allowed for tenant 'team-a'",
                "requires the label resource.kubernetes.io/admin-access",
            ],
        ),
        (claim(request(exact("a", "mig.nvidia.com", 3))), ["quota for mig.nvidia.com exceeded"]),
        (
            claim(first_available("x", exact("big", count=5), exact("s", "mig.nvidia.com", 1))),
            ["at most 4 per request", "allows at most 4 per claim"],
        ),
    ],
    ids=[
        "allowed",
        "class-not-allowed",
        "count-over-limits",
        "mode-all",
        "uuid-rule",
        "admin-access",
        "tenant-total",
        "first-available-alternative",
    ],
)
def test_claim_decisions(obj: dict[str, Any], expected: list[str]) -> None:
    got = messages(obj, facts())
    assert len(got) == len(expected), got
    for fragment, message in zip(expected, got, strict=True):
        assert fragment in message


def test_denial_names_policy_tenant_class_and_numbers_and_holders() -> None:
    decision = evaluate(admission(claim(request(exact(count=3)))), POLICIES, facts(used=6))
    (reason,) = decision.reasons
    assert (reason.policy, reason.tenant, reason.device_class) == (
        "Tenant/team-a",
        "team-a",
        "gpu.nvidia.com",
    )
    assert (reason.used, reason.limit, reason.requested) == (6, 8, 3)
    assert "used 6 + requested 3 > limit 8; held by claim:team-a/old (6)" in reason.message


def test_admin_access_passes_for_admin_tenant_with_label() -> None:
    ops = namespace("ops", **{"resource.kubernetes.io/admin-access": "true"})
    obj = claim(request(exact(count=None, mode="All", admin=True)), namespace="ops")
    decision = evaluate(admission(obj), POLICIES, Facts(tenant=ADMINS, namespace=ops))
    (reason,) = decision.reasons
    assert reason.message.endswith("allocationMode All is not allowed for class 'gpu.nvidia.com'")


def test_warn_and_audit_rules_do_not_deny() -> None:
    decision = evaluate(admission(claim(request(exact(count=3)))), POLICIES, facts())
    assert decision.allowed
    assert any("more than two GPUs is unusual" in w for w in decision.warnings)
    assert any("team-a GPU request" in a for a in decision.audit.values())


def test_claim_charges_its_tenant() -> None:
    decision = evaluate(admission(claim(request(exact(count=3)))), POLICIES, facts())
    assert decision.holds == {"claim:team-a/claim": {"gpu.nvidia.com": 3}}


def test_re_admitting_the_same_holder_replaces_its_charge() -> None:
    held = Facts(
        tenant=TEAM_A,
        usage={
            "gpu.nvidia.com": ClassUsage(
                8, (Holder("claim:team-a/claim", 4), Holder("claim:team-a/x", 4))
            )
        },
    )
    assert evaluate(admission(claim(request(exact(count=4)))), POLICIES, held).allowed


def test_template_is_judged_but_charges_nothing() -> None:
    decision = evaluate(admission(template(request(exact(count=5)))), POLICIES, facts())
    assert not decision.allowed and decision.holds == {}


def test_pod_charges_each_template_claim_under_its_uid() -> None:
    tmpl = template(request(exact(count=3)), name="t3")
    obj = pod(claims={"a": "t3", "b": "t3"}, containers={"x": ["a"], "y": ["b"]}, uid="u1")
    decision = evaluate(admission(obj), POLICIES, facts(used=3, templates={"t3": tmpl}))
    assert decision.holds == {"pod:u1/a": {"gpu.nvidia.com": 3}, "pod:u1/b": {"gpu.nvidia.com": 3}}
    assert not decision.allowed  # 3 + 6 > 8
    assert "used 3 + requested 6 > limit 8" in decision.reasons[0].message


def test_pod_with_unknown_template_is_allowed_with_a_warning() -> None:
    decision = evaluate(admission(pod(claims={"a": "missing"})), POLICIES, facts())
    assert decision.allowed
    assert "'missing' not found" in decision.warnings[0]


def test_unknown_namespace_denied_only_when_settings_say_so() -> None:
    strict = PolicySet(tenants=POLICIES.tenants, settings=Settings(deny_unknown_namespaces=True))
    obj = claim(request(exact()), namespace="nobody")
    assert evaluate(admission(obj), POLICIES, facts(tenant=None)).allowed
    assert "belongs to no tenant" in messages(obj, facts(tenant=None), strict)[0]


def test_malformed_object_is_a_denial_not_a_crash() -> None:
    obj = claim({"name": "gpu", "deviceClassName": "gpu.nvidia.com"})
    assert "cannot read the object" in messages(obj, facts())[0]


def test_cel_error_denies_with_the_error_when_action_is_deny() -> None:
    broken = DeviceClassPolicy(
        "broken", frozenset(), validations=(rule("object.spec.nope.deeper == 1", "needs nope"),)
    )
    policies = PolicySet(tenants=(TEAM_A,), class_policies=(broken,))
    (message,) = messages(claim(request(exact())), facts(), policies)
    assert "needs nope (rule could not be evaluated:" in message


OWNED = "object.metadata.labels['owner'] == 'me'"  # without labels: an error at run time


@pytest.mark.parametrize(
    ("failure_policy", "allowed"),
    [(FailurePolicy.FAIL, False), (FailurePolicy.IGNORE, True)],
    ids=["Fail", "Ignore"],
)
def test_failure_policy_decides_what_a_rule_error_does(
    failure_policy: FailurePolicy, allowed: bool
) -> None:
    owned = DeviceClassPolicy(
        "owned",
        frozenset(),
        validations=(rule(OWNED, "owned by me"),),
        failure_policy=failure_policy,
    )
    policies = PolicySet(tenants=(TEAM_A,), class_policies=(owned,))
    decision = evaluate(admission(claim(request(exact()))), policies, facts())
    assert decision.allowed is allowed
    error = "no such key: 'labels'"
    if allowed:
        assert not decision.reasons
        assert [
            w for w in decision.warnings if "skipped by failurePolicy Ignore" in w and error in w
        ]
    else:
        (reason,) = decision.reasons
        assert "owned by me (rule could not be evaluated: " in reason.message
        assert error in reason.message


def test_failure_policy_ignore_still_denies_a_rule_that_returns_false() -> None:
    owned = DeviceClassPolicy(
        "owned",
        frozenset(),
        validations=(rule(OWNED, "owned by me"),),
        failure_policy=FailurePolicy.IGNORE,
    )
    policies = PolicySet(tenants=(TEAM_A,), class_policies=(owned,))
    obj = claim(request(exact()))
    obj["metadata"]["labels"] = {"owner": "someone else"}
    assert messages(obj, facts(), policies) == ["request 'gpu': owned by me"]


def test_rules_reading_the_object_see_it() -> None:
    labelled = DeviceClassPolicy(
        "labelled",
        frozenset(),
        validations=(
            rule(
                "has(object.metadata.labels) && 'owner' in object.metadata.labels",
                "needs an owner label",
            ),
        ),
    )
    policies = PolicySet(tenants=(TEAM_A,), class_policies=(labelled,))
    obj = claim(request(exact()))
    assert messages(obj, facts(), policies) == ["request 'gpu': needs an owner label"]
    obj["metadata"]["labels"] = {"owner": "me"}
    assert messages(obj, facts(), policies) == []
